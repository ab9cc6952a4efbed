package chat_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/sqlite"
)

type mcpServers map[string][]chat.MCPServer

func (m mcpServers) ForChannel(channel string) []chat.MCPServer { return m[channel] }

// TestMCPCommand: /baton mcp says which MCP servers the channel's tasks
// may use, to the caller alone.
func TestMCPCommand(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "baton.db"), sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := chat.NewService(st, &recordingQueue{}, chat.Config{DefaultPiece: "chat", MCP: mcpServers{"slack:C1": {
		{Name: "github", Tools: 12, Listed: true},
		{Name: "tracker", Pieces: []string{"research"}},
	}}})
	ask := func(channel string) chat.Reply {
		r, err := svc.HandleCommand(ctx, chat.Command{Name: "mcp", Channel: channel, Author: chat.Author{ID: "slack:U1", Name: "alice"}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := ask("slack:C1")
	for _, want := range []string{"`github`: every piece; 12 tools offered", "`tracker`: pieces research; tools not listed yet"} {
		if !strings.Contains(r.Text, want) || r.Public {
			t.Errorf("reply %+v lacks %q", r, want)
		}
	}
	if r := ask("slack:C9"); !strings.Contains(r.Text, "No MCP server is bound to this channel") {
		t.Errorf("elsewhere: %q", r.Text)
	}
}
