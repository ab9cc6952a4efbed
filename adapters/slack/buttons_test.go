package slack

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/google/go-cmp/cmp"
)

var approvalButtons = []chat.Button{
	{Action: "approve:7.1", Label: "Approve", Style: chat.StylePrimary},
	{Action: "deny:7.1", Label: "Deny", Style: chat.StyleDanger},
	{Action: "always:7.1", Label: "Always allow"},
}

func TestPosterPostButtons(t *testing.T) {
	const text = "**Approve** `rm -rf /tmp/x`? <!channel> & @here"
	const rendered = "*Approve* `rm -rf /tmp/x`? @\u200bchannel &amp; @\u200bhere"
	tests := []struct {
		name     string
		thread   core.ThreadRef
		threadTS string
	}{
		{"in a thread", thread("1700000000.000100"), "1700000000.000100"},
		{"in a direct-message channel", core.ThreadRef{Platform: core.PlatformSlack, Team: slackfake.Team, Channel: "C1", Thread: "C1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := slackfake.NewServer(t)
			p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
			id, err := p.PostButtons(context.Background(), tt.thread, text, approvalButtons)
			if err != nil {
				t.Fatal(err)
			}
			posts := f.Recorded("chat.postMessage")
			if len(posts) != 1 || id == "" {
				t.Fatalf("posts %+v, id %q; want one, its ts returned", posts, id)
			}
			c := posts[0]
			if c.Text != rendered || c.Section() != rendered || c.ThreadTS != tt.threadTS || c.Parse != "none" || c.LinkNames != "false" {
				t.Errorf("posted text %q, section %q, thread %q, parse %q, link_names %q; want %q as both, in thread %q, nothing parsed",
					c.Text, c.Section(), c.ThreadTS, c.Parse, c.LinkNames, rendered, tt.threadTS)
			}
			want := []slackfake.Button{
				{ActionID: "baton_0", Value: "approve:7.1", Label: "Approve", Style: "primary"},
				{ActionID: "baton_1", Value: "deny:7.1", Label: "Deny", Style: "danger"},
				{ActionID: "baton_2", Value: "always:7.1", Label: "Always allow"},
			}
			if diff := cmp.Diff(want, c.Buttons()); diff != "" {
				t.Errorf("buttons (-want +got):\n%s", diff)
			}
			if !strings.Contains(c.Blocks, `"verbatim":true`) {
				t.Errorf("section not verbatim (Slack would link and mention in it): %s", c.Blocks)
			}
		})
	}
}

// A text longer than a section holds: the section is cut (without half an
// entity), the message's text keeps it all.
func TestPosterPostButtonsLongText(t *testing.T) {
	f := slackfake.NewServer(t)
	p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
	text := strings.Repeat("a & b ", 700) // 4,200 characters, more once & is escaped
	if _, err := p.PostButtons(context.Background(), thread("1.1"), text, approvalButtons); err != nil {
		t.Fatal(err)
	}
	posts := f.Recorded("chat.postMessage")
	if len(posts) != 1 {
		t.Fatalf("%d posts, want one", len(posts))
	}
	c := posts[0]
	section := c.Section()
	if n := utf8.RuneCountInString(section); n > 3000 || n < 2900 || !strings.HasSuffix(section, "…") {
		t.Errorf("section of %d characters ending %q; want cut to at most 3,000, with an ellipsis", n, section[max(0, len(section)-12):])
	}
	if strings.HasSuffix(strings.TrimSuffix(section, "…"), "&") || strings.HasSuffix(strings.TrimSuffix(section, "…"), "&amp") {
		t.Errorf("section ends in half an entity: %q", section[len(section)-12:])
	}
	if c.Text != render(text) {
		t.Errorf("text is %d characters, want the whole rendering (%d)", utf8.RuneCountInString(c.Text), utf8.RuneCountInString(render(text)))
	}
	if len(c.Buttons()) != 3 {
		t.Errorf("buttons %+v, want three", c.Buttons())
	}
}

// Blocks Slack refuses in any size: the text is posted alone, its words
// naming the commands.
func TestPosterPostButtonsRefused(t *testing.T) {
	f := slackfake.NewServer(t)
	f.RefuseBlocks("chat.postMessage")
	p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
	id, err := p.PostButtons(context.Background(), thread("1.1"), "Approve? Reply `!approve`.", approvalButtons)
	if err != nil {
		t.Fatal(err)
	}
	posts := f.Recorded("chat.postMessage")
	if id == "" || len(posts) != 1 || posts[0].Blocks != "" || posts[0].Text != "Approve? Reply `!approve`." {
		t.Errorf("id %q, posts %+v; want the text alone, posted once", id, posts)
	}
}

func TestPosterUpdateButtons(t *testing.T) {
	f := slackfake.NewServer(t)
	p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
	ctx := context.Background()
	if err := p.UpdateButtons(ctx, thread("1.1"), "1.2", "Running <!here>", []chat.Button{{Action: "stop:7", Label: "Stop", Style: chat.StyleDanger}}); err != nil {
		t.Fatal(err)
	}
	if err := p.UpdateButtons(ctx, thread("1.1"), "1.2", "✅ Bash approved by alice", nil); err != nil {
		t.Fatal(err)
	}
	ups := f.Recorded("chat.update")
	if len(ups) != 2 {
		t.Fatalf("%d updates, want 2", len(ups))
	}
	if ups[0].TS != "1.2" || ups[0].Text != "Running @\u200bhere" || ups[0].Section() != ups[0].Text {
		t.Errorf("first update %+v; want message 1.2, rendered, the text in its section", ups[0])
	}
	if diff := cmp.Diff([]slackfake.Button{{ActionID: "baton_0", Value: "stop:7", Label: "Stop", Style: "danger"}}, ups[0].Buttons()); diff != "" {
		t.Errorf("first update's buttons (-want +got):\n%s", diff)
	}
	if ups[1].Blocks == "" || len(ups[1].Buttons()) != 0 || ups[1].Section() != "✅ Bash approved by alice" {
		t.Errorf("second update %+v; want blocks with the section alone, so the buttons go", ups[1])
	}
}

func TestCutRunes(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"ééééé", 3, "éé…"},
		{"ab &amp; c", 6, "ab …"},
		{"see <https://e.test|x>", 10, "see …"},
	}
	for _, tt := range tests {
		if got := cutRunes(tt.s, tt.n); got != tt.want {
			t.Errorf("cutRunes(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
