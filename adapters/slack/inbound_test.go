package slack

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core/chat"
	"github.com/google/go-cmp/cmp"
)

// sendAll signs and sends events to an HTTP-mode adapter at base.
func sendAll(t *testing.T, base string, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		if status, b := do(t, slackfake.Sign(t, base, "/slack/events", body, time.Now(), "application/json")); status != 200 {
			t.Fatalf("status %d: %s", status, b)
		}
	}
}

// handedMessages waits for n messages handed to svc and returns them, in
// the order they came (the adapter runs one worker in these tests).
func handedMessages(t *testing.T, svc *recorder, n int) []chat.Message {
	t.Helper()
	eventually(t, fmt.Sprintf("%d messages handed over", n), func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return len(svc.messages) >= n
	})
	svc.mu.Lock()
	defer svc.mu.Unlock()
	return append([]chat.Message(nil), svc.messages...)
}

// The model reads Slack's markup as people see it: users by their names
// (an unknown one by id, and no error for it), channels, special
// mentions, user groups, links and entities; a message of rich_text
// blocks alone is read from its blocks. The original stays beside it.
func TestTextForTheModel(t *testing.T) {
	svc := &recorder{}
	f := slackfake.NewServer(t)
	f.SetUser("U1", "alice")
	f.SetUser("U2", "bob")
	f.SetUser("U3", "") // no display name: the real name
	_, base := startHTTP(t, svc, f, Config{Workers: 1})
	const mention = "<@UBATON> ask <@U2>, <@U3> and <@U404> in <#C9|ops> <!here> <!subteam^S1|@oncall>: " +
		"see <https://e.test/a?b=1&amp;c=2|the doc> &amp; fix &lt;b&gt;"
	// Slack's documented shape of a message with rich_text only.
	blocks := []any{map[string]any{"type": "rich_text", "block_id": "2ZRv", "elements": []any{
		map[string]any{"type": "rich_text_section", "elements": []any{
			map[string]any{"type": "user", "user_id": "UBATON"},
			map[string]any{"type": "text", "text": " please check "},
			map[string]any{"type": "link", "url": "https://example.com", "text": "this"},
			map[string]any{"type": "text", "text": " with "},
			map[string]any{"type": "user", "user_id": "U2"},
			map[string]any{"type": "broadcast", "range": "channel"},
			map[string]any{"type": "text", "text": "\n"},
		}},
		map[string]any{"type": "rich_text_list", "style": "ordered", "indent": 0, "elements": []any{
			map[string]any{"type": "rich_text_section", "elements": []any{map[string]any{"type": "text", "text": "a < b"}}},
			map[string]any{"type": "rich_text_section", "elements": []any{map[string]any{"type": "text", "text": "run", "style": map[string]any{"code": true}}}},
		}},
	}}}
	sendAll(t, base,
		slackfake.MentionEvent("Ev1", "U1", mention, "1700000000.000100", ""),
		slackfake.Callback("Ev2", map[string]any{"type": "message", "user": "U2", "text": "", "blocks": blocks, "ts": "1700000000.000200",
			"channel": "C1", "channel_type": "channel", "thread_ts": "1700000000.000100"}),
	)
	got := handedMessages(t, svc, 2)
	want := []chat.Message{
		{Thread: thread("1700000000.000100"), Channel: "slack:C1", MsgID: "1700000000.000100", EventID: "Ev1",
			Author: chat.Author{ID: "slack:U1", Name: "alice"}, Addressed: true,
			Text:     "ask @bob, @Real U3 and @U404 in #ops @here @oncall: see the doc (https://e.test/a?b=1&c=2) & fix <b>",
			Original: mention},
		{Thread: thread("1700000000.000100"), Channel: "slack:C1", MsgID: "1700000000.000200", EventID: "Ev2",
			Author: chat.Author{ID: "slack:U2", Name: "bob"}, Addressed: true,
			Text:     "please check this (https://example.com) with @bob@channel\n1. a < b\n2. `run`",
			Original: "<@UBATON> please check <https://example.com|this> with <@U2><!channel>\n1. a &lt; b\n2. `run`"},
	}
	ignoreAt := cmp.Transformer("at", func(m chat.Message) chat.Message { m.At = time.Time{}; return m })
	if diff := cmp.Diff(want, got, ignoreAt); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if calls := f.Recorded("chat.postEphemeral", "chat.postMessage"); len(calls) != 0 {
		t.Errorf("the unknown user was reported to someone: %+v", calls)
	}
}

// A message mentioning 10,000 people costs a bounded number of users.info
// calls; names already known cost none.
func TestManyMentionsBoundLookups(t *testing.T) {
	svc := &recorder{}
	f := slackfake.NewServer(t)
	f.SetUser("U1", "alice")
	f.SetUser("U2", "bob")
	f.SetUser("U0000001", "first")
	_, base := startHTTP(t, svc, f, Config{Workers: 1})
	var b strings.Builder
	b.WriteString("<@UBATON> ")
	for range 100 {
		b.WriteString("<@U2> ")
	}
	for i := 1; i <= 10_000; i++ {
		fmt.Fprintf(&b, "<@U%07d> ", i)
	}
	text := b.String()
	sendAll(t, base, slackfake.MentionEvent("Ev1", "U1", text, "1700000000.000100", ""))
	got := handedMessages(t, svc, 1)[0].Text
	calls := f.UserCalls()
	if calls > maxLookups {
		t.Errorf("%d users.info calls for one message, want at most %d", calls, maxLookups)
	}
	if !strings.HasPrefix(got, "@bob @bob") || !strings.Contains(got, " @first @U0000002 ") || !strings.HasSuffix(got, "@U0010000") {
		t.Errorf("text begins %q … ends %q", got[:40], got[len(got)-40:])
	}
	if strings.Contains(got, "<@") {
		t.Error("a mention was left in Slack's markup")
	}

	// The same people again: the names and the failures are cached, and
	// the next people not asked yet get at most the same budget.
	sendAll(t, base, slackfake.MentionEvent("Ev2", "U1", text, "1700000000.000200", ""))
	handedMessages(t, svc, 2)
	again := f.UserCalls() - calls
	if again > maxLookups {
		t.Errorf("%d more users.info calls for the repeat, want at most %d", again, maxLookups)
	}
}

// Slackbot and system notices are not people: nothing they post starts a
// task or becomes a comment.
func TestSlackbotAndNoticesIgnored(t *testing.T) {
	svc := &recorder{}
	_, base := startHTTP(t, svc, slackfake.NewServer(t), Config{Workers: 1})
	const root = "1700000000.000100"
	sendAll(t, base,
		// A reminder set with /remind, posted by Slackbot, mentioning the bot.
		slackfake.MentionEvent("Ev1", "USLACKBOT", "Reminder: <@UBATON> deploy staging.", "1700000000.000200", ""),
		slackfake.Callback("Ev2", map[string]any{"type": "message", "user": "USLACKBOT", "text": "Reminder: <@UBATON> deploy staging.",
			"ts": "1700000000.000200", "channel": "C1", "channel_type": "channel"}),
		// Slackbot in the bot's direct messages.
		slackfake.Callback("Ev3", map[string]any{"type": "message", "user": "USLACKBOT", "text": "You have been added to #ops",
			"ts": "1700000000.000300", "channel": "D1", "channel_type": "im"}),
		// Notices: the bot and a person joining, a topic set, in a thread.
		slackfake.Callback("Ev4", map[string]any{"type": "message", "subtype": "channel_join", "user": "UBATON", "text": "<@UBATON> has joined the channel",
			"ts": "1700000000.000400", "channel": "C1", "channel_type": "channel"}),
		slackfake.Callback("Ev5", map[string]any{"type": "message", "subtype": "channel_join", "user": "U2", "text": "<@U2> has joined the channel",
			"ts": "1700000000.000500", "channel": "C1", "channel_type": "channel", "thread_ts": root}),
		slackfake.Callback("Ev6", map[string]any{"type": "message", "subtype": "channel_topic", "user": "U2", "text": "<@U2> set the channel topic: <@UBATON> rocks",
			"topic": "<@UBATON> rocks", "ts": "1700000000.000600", "channel": "C1", "channel_type": "channel"}),
		// A person, last: once it is handed over, the rest were dropped.
		slackfake.MentionEvent("Ev7", "U1", "<@UBATON> hello", "1700000000.000700", ""),
	)
	got := handedMessages(t, svc, 1)
	if len(got) != 1 || got[0].EventID != "Ev7" {
		t.Errorf("handed over %+v, want only the person's message", got)
	}
}

// /slack/commands answers the configured command only; another command
// of the app gets a short note naming the one Baton serves, and nothing
// runs.
func TestOtherSlashCommand(t *testing.T) {
	form := func(cmd, text string) string {
		return url.Values{"team_id": {slackfake.Team}, "channel_id": {"C1"}, "user_id": {"U1"}, "user_name": {"alice"},
			"command": {cmd}, "text": {text}, "response_url": {""}}.Encode()
	}
	answer := func(t *testing.T, base, body string) string {
		t.Helper()
		status, b := do(t, slackfake.Sign(t, base, "/slack/commands", body, time.Now(), "application/x-www-form-urlencoded"))
		var got map[string]string
		if err := json.Unmarshal([]byte(b), &got); status != 200 || err != nil || got["response_type"] != "ephemeral" {
			t.Fatalf("status %d, body %s: %v", status, b, err)
		}
		return got["text"]
	}
	tests := []struct {
		name, command, locale, sent, want string
		runs                              bool
	}{
		{"another command", "", "", "/deploy", "This app answers `/baton` only; `/deploy` is not one of its commands.", false},
		{"in Japanese", "", "ja", "/deploy", "このアプリが答えるのは `/baton` だけです。`/deploy` はこのアプリのコマンドではありません。", false},
		{"renamed", "/agent", "", "/agent", "ok", true},
		{"the default name once renamed", "/agent", "", "/baton", "This app answers `/agent` only; `/baton` is not one of its commands.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &recorder{reply: chat.Reply{Text: "ok"}}
			_, base := startHTTP(t, svc, slackfake.NewServer(t), Config{Command: tt.command, Locale: tt.locale})
			if got := answer(t, base, form(tt.sent, "status")); got != tt.want {
				t.Errorf("answer = %q, want %q", got, tt.want)
			}
			svc.mu.Lock()
			defer svc.mu.Unlock()
			if ran := len(svc.commands) > 0; ran != tt.runs {
				t.Errorf("command handed to the service: %v, want %v", ran, tt.runs)
			}
		})
	}
}
