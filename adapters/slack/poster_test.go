package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/google/go-cmp/cmp"
)

func thread(ts string) core.ThreadRef {
	return core.ThreadRef{Platform: core.PlatformSlack, Team: slackfake.Team, Channel: "C1", Thread: ts}
}

func TestPosterPost(t *testing.T) {
	tests := []struct {
		name   string
		thread core.ThreadRef
		text   string
		want   []slackfake.Call
	}{
		{"in the thread, rendered, no pings", thread("1700000000.000100"), "**Done** <!channel> & @here",
			[]slackfake.Call{{Method: "chat.postMessage", Channel: "C1", ThreadTS: "1700000000.000100", Text: "*Done* @\u200bchannel &amp; @\u200bhere", Parse: "none", LinkNames: "false"}}},
		{"a direct-message channel is one thread", core.ThreadRef{Platform: core.PlatformSlack, Team: slackfake.Team, Channel: "D1", Thread: "D1"}, "hi",
			[]slackfake.Call{{Method: "chat.postMessage", Channel: "D1", Text: "hi", Parse: "none", LinkNames: "false"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := slackfake.NewServer(t)
			p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
			id, err := p.Post(context.Background(), tt.thread, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if id == "" {
				t.Error("Post returned no ts")
			}
			tt.want[0].Posted = id // the ts Slack answered
			if diff := cmp.Diff(tt.want, f.Recorded()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPosterPostLongRendering(t *testing.T) {
	// 2,900 characters of Markdown that escaping makes longer than 3,000.
	f := slackfake.NewServer(t)
	p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
	text := strings.Repeat("a < b\n", 2900/6)
	if _, err := p.Post(context.Background(), thread("1.1"), text); err != nil {
		t.Fatal(err)
	}
	posts := f.Recorded("chat.postMessage")
	if len(posts) < 2 {
		t.Fatalf("got %d posts, want the rendered text split", len(posts))
	}
	for i, c := range posts {
		if n := len([]rune(c.Text)); n > 3000 {
			t.Errorf("post %d has %d characters", i, n)
		}
	}
}

func TestPosterUpdateAndReact(t *testing.T) {
	f := slackfake.NewServer(t)
	p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
	ctx := context.Background()
	long := strings.Repeat("é", 3000) // 6,000 bytes
	if err := p.Update(ctx, thread("1.1"), "1.2", long); err != nil {
		t.Fatal(err)
	}
	if err := p.React(ctx, thread("1.1"), "1.1", "eyes", false); err != nil {
		t.Fatal(err)
	}
	if err := p.React(ctx, thread("1.1"), "1.1", "eyes", true); err != nil {
		t.Fatal(err)
	}
	f.Fail("reactions.add", "already_reacted")
	f.Fail("reactions.remove", "no_reaction")
	if err := p.React(ctx, thread("1.1"), "1.1", "eyes", false); err != nil {
		t.Errorf("already_reacted: %v, want success", err)
	}
	if err := p.React(ctx, thread("1.1"), "1.1", "eyes", true); err != nil {
		t.Errorf("no_reaction: %v, want success", err)
	}
	got := f.Recorded()
	if len(got[0].Text) > 3800 || got[0].Method != "chat.update" || got[0].TS != "1.2" {
		t.Errorf("update = %s ts %s with %d bytes, want chat.update of 1.2 within 3,800 bytes", got[0].Method, got[0].TS, len(got[0].Text))
	}
	want := []slackfake.Call{{Method: "reactions.add", Channel: "C1", TS: "1.1", Name: "eyes"}, {Method: "reactions.remove", Channel: "C1", TS: "1.1", Name: "eyes"}}
	if diff := cmp.Diff(want, got[1:]); diff != "" {
		t.Errorf("reactions (-want +got):\n%s", diff)
	}
}

func TestPosterUpload(t *testing.T) {
	f := slackfake.NewServer(t)
	p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
	content := "# report\n" + strings.Repeat("line\n", 100)
	id, err := p.Upload(context.Background(), thread("1.1"), "report.md", strings.NewReader(content), int64(len(content)), "Here it is <!here>")
	if err != nil {
		t.Fatal(err)
	}
	got := f.Recorded("files.completeUploadExternal")
	want := []slackfake.Call{{Method: "files.completeUploadExternal", Channel: "C1", ThreadTS: "1.1", Text: "Here it is @\u200bhere", Name: id}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("complete (-want +got):\n%s", diff)
	}
	if got := f.File(id); got != content {
		t.Errorf("uploaded %q, want the file's content", got)
	}
}

func TestPosterErrors(t *testing.T) {
	tests := []struct {
		name      string
		code      string // error answered; "" for a 429
		permanent bool
		after     time.Duration
		mention   string
	}{
		{name: "rate limited", after: 7 * time.Second},
		{name: "channel gone", code: "channel_not_found", permanent: true},
		{name: "not in channel", code: "not_in_channel", permanent: true},
		{name: "archived", code: "is_archived", permanent: true},
		{name: "bad token", code: "invalid_auth", permanent: true},
		{name: "revoked", code: "account_inactive", permanent: true},
		{name: "slack trouble", code: "internal_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := slackfake.NewServer(t)
			if tt.code == "" {
				f.RateLimit("chat.postMessage", 1)
			} else {
				f.Fail("chat.postMessage", tt.code)
			}
			p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
			_, err := p.Post(context.Background(), thread("1.1"), "hi")
			if err == nil {
				t.Fatal("Post succeeded")
			}
			if got := errors.Is(err, chat.ErrPermanent); got != tt.permanent {
				t.Errorf("permanent = %v, want %v (%v)", got, tt.permanent, err)
			}
			var rl *chat.RateLimitedError
			if got := errors.As(err, &rl); got != (tt.after > 0) || got && rl.After != tt.after {
				t.Errorf("rate limit = %v %v, want after %s", got, rl, tt.after)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not say %q", err, tt.mention)
			}
		})
	}
}

// refusingText is Markdown of about 2,800 characters, prose then code,
// each paragraph and line numbered so that order can be checked.
func refusingText() (string, []string) {
	var b strings.Builder
	var marks []string
	for i := 0; b.Len() < 1500; i++ {
		m := fmt.Sprintf("paragraph-%02d", i)
		marks = append(marks, m)
		fmt.Fprintf(&b, "%s says a little more about the answer & its reasons.\n\n", m)
	}
	b.WriteString("```go\n")
	for i := 0; b.Len() < 2800; i++ {
		m := fmt.Sprintf("line-%02d", i)
		marks = append(marks, m)
		fmt.Fprintf(&b, "fmt.Println(%q) // one line of the example\n", m)
	}
	b.WriteString("```\n")
	return b.String(), marks
}

// TestPosterRefusedAsTooLong: Slack refusing a text as too long is not the
// end of it: the text is posted again in smaller parts, or as a file when
// no size passes.
func TestPosterRefusedAsTooLong(t *testing.T) {
	text, marks := refusingText()
	t.Run("halved until it passes", func(t *testing.T) {
		f := slackfake.NewServer(t)
		f.MaxText("chat.postMessage", 1000)
		p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
		id, err := p.Post(context.Background(), thread("1.1"), text)
		if err != nil {
			t.Fatal(err)
		}
		posts := f.Recorded("chat.postMessage")
		if f.Refusals() == 0 || len(posts) < 3 || id == "" {
			t.Fatalf("%d refused, %d posted, id %q: want refusals, then at least 3 posts", f.Refusals(), len(posts), id)
		}
		var all strings.Builder
		for i, c := range posts {
			if n := len([]rune(c.Text)); n > 1000 {
				t.Errorf("post %d has %d characters", i, n)
			}
			if strings.Count(c.Text, "```")%2 != 0 {
				t.Errorf("post %d leaves a code fence open:\n%s", i, c.Text)
			}
			if c.ThreadTS != "1.1" {
				t.Errorf("post %d in thread %q", i, c.ThreadTS)
			}
			all.WriteString(c.Text)
		}
		at := 0
		for _, m := range marks {
			i := strings.Index(all.String()[at:], m)
			if i < 0 {
				t.Fatalf("%s missing or out of order in the posts", m)
			}
			at += i
		}
		if n := len(f.Recorded("files.completeUploadExternal")); n != 0 {
			t.Errorf("%d uploads, want none", n)
		}
	})
	t.Run("refused in any size: a file", func(t *testing.T) {
		f := slackfake.NewServer(t)
		f.MaxText("chat.postMessage", 100)
		p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
		id, err := p.Post(context.Background(), thread("1.1"), text)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(f.Recorded("chat.postMessage")); n != 0 {
			t.Errorf("%d posts, want none", n)
		}
		ups := f.Recorded("files.completeUploadExternal")
		if len(ups) != 1 || ups[0].ThreadTS != "1.1" || ups[0].Name != id {
			t.Fatalf("uploads %+v (id %q), want one file in thread 1.1", ups, id)
		}
		if got := f.File(id); got != text {
			t.Errorf("the file holds %.100q…, want the Markdown text", got)
		}
	})
	t.Run("edit cut until it passes", func(t *testing.T) {
		f := slackfake.NewServer(t)
		f.MaxText("chat.update", 1000)
		p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
		if err := p.Update(context.Background(), thread("1.1"), "1.2", text); err != nil {
			t.Fatal(err)
		}
		ups := f.Recorded("chat.update")
		if f.Refusals() == 0 || len(ups) != 1 || len(ups[0].Text) > 1000 || !strings.HasPrefix(ups[0].Text, "paragraph-00") {
			t.Errorf("%d refused, edits %+v: want refusals, then one edit of the text's start within 1,000 bytes", f.Refusals(), ups)
		}
	})
	t.Run("edit refused in any size", func(t *testing.T) {
		f := slackfake.NewServer(t)
		f.MaxText("chat.update", 100)
		p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
		err := p.Update(context.Background(), thread("1.1"), "1.2", text)
		if !errors.Is(err, chat.ErrPermanent) || !strings.Contains(err.Error(), "longer than Slack accepts") {
			t.Errorf("err = %v, want a permanent error saying the text is too long", err)
		}
	})
}
