package discord

import (
	"fmt"
	"strings"
	"testing"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
)

// Channels a message links that the gateway's state does not know cost a
// bounded number of lookups, however many there are.
func TestManyChannelLinksBoundLookups(t *testing.T) {
	svc := &collector{}
	f, _ := runAdapter(t, svc, Config{GuildID: discordfake.Guild, IgnoreBots: true})
	var b strings.Builder
	b.WriteString("<@" + discordfake.Bot + "> compare")
	for i := range 500 {
		fmt.Fprintf(&b, " <#%d>", 10_000+i)
	}
	before := f.Lookups()
	f.Dispatch("MESSAGE_CREATE", map[string]any{
		"id": "7001", "channel_id": discordfake.Text, "guild_id": discordfake.Guild, "content": b.String(), "type": 0,
		"timestamp": "2026-11-30T10:00:00Z",
		"author":    map[string]any{"id": "42", "username": "user42"},
		"member":    map[string]any{"roles": []string{"55"}},
		"mentions":  []any{map[string]any{"id": discordfake.Bot, "username": "baton", "bot": true}},
	})
	var text string
	waitFor(t, "the message handed over", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		if len(svc.msgs) == 0 {
			return false
		}
		text = svc.msgs[0].Text
		return true
	})
	if n := f.Lookups() - before; n > maxLookups {
		t.Errorf("%d channel lookups for one message, want at most %d", n, maxLookups)
	}
	// The text handed over is what the model reads (chat.Message.Text).
	if !strings.Contains(text, "compare #10000 #10001") || !strings.Contains(text, "#10499") {
		t.Errorf("the service was handed:\n%.300s", text)
	}
}
