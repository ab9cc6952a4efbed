package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/slack-go/slack/slackevents"
)

// slackSeeds are event bodies shaped as Slack documents them (Events API
// "event_callback" envelopes and the URL verification challenge), and a
// few broken ones.
var slackSeeds = []string{
	`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`,
	slackfake.MentionEvent("Ev1", "U1", "<@UBATON> ask <@U2> in <#C1|ops> <!here> <https://e.test|doc> &amp;", "1700000000.000100", ""),
	slackfake.MessageEvent("Ev2", "U2", "and the <!subteam^S1|@team> &lt;b&gt;", "1700000000.000200", "1700000000.000100"),
	slackfake.Callback("Ev3", map[string]any{"type": "message", "channel_type": "im", "user": "U3", "text": "", "ts": "1700000000.000300", "channel": "D3",
		"blocks": []any{map[string]any{"type": "rich_text", "elements": []any{map[string]any{"type": "rich_text_section", "elements": []any{
			map[string]any{"type": "user", "user_id": "U2"}, map[string]any{"type": "link", "url": "https://e.test"},
			map[string]any{"type": "broadcast", "range": "here"}, map[string]any{"type": "date", "timestamp": 1700000000}}}}}}}),
	slackfake.Callback("Ev4", map[string]any{"type": "message", "subtype": "file_share", "user": "U1", "text": "<@UBATON> see", "ts": "1700000000.000400",
		"channel": "C1", "channel_type": "channel", "files": []any{map[string]any{"id": "F1", "file_access": "check_file_info"}}}),
	slackfake.Callback("Ev5", map[string]any{"type": "reaction_added", "user": "U1", "reaction": "x", "item": map[string]any{"type": "message", "channel": "C1", "ts": "1700000000.000100"}}),
	slackfake.Callback("Ev6", map[string]any{"type": "message", "subtype": "message_changed", "channel": "C1", "message": map[string]any{"user": "U1", "text": "x"}}),
	slackfake.Callback("Ev7", map[string]any{"type": "app_mention", "user": "USLACKBOT", "text": "Reminder: <@UBATON>", "ts": "1", "channel": "C1"}),
	`{"type":"event_callback","event":{"type":"message","text":"<@UBATON","blocks":[{"type":"rich_text","elements":[{"type":"rich_text_list","elements":[{}]}]}]}}`,
	`{"type":"event_callback","event":null}`,
	`{"type":"app_rate_limited"}`,
	`{"type": "event_callback",`,
	`[]`,
}

// fuzzAdapter is an HTTP-mode adapter over the fake Slack whose events
// the fuzz target runs itself (no Run, no workers), so that a panic is
// not recovered.
func fuzzAdapter(f *testing.F, svc Service) *Adapter {
	fake := slackfake.NewServer(f)
	fake.SetUser("U2", "bob")
	a, err := New(svc, Config{Inbox: newInbox(f), Mode: ModeHTTP, BotToken: slackfake.BotToken, SigningSecret: slackfake.SigningSecret, APIURL: fake.URL()})
	if err != nil {
		f.Fatal(err)
	}
	return a
}

// FuzzSlackSignature: a request whose signature is not Slack's, over any
// body and any headers, is answered 401 and hands nothing over; a signed
// one never is.
func FuzzSlackSignature(f *testing.F) {
	for _, s := range slackSeeds {
		f.Add(s, "", "", true)
		f.Add(s, "1700000000", "v0="+strings.Repeat("ab", 32), false)
	}
	f.Add("", "x", "v0=", false)
	f.Add("body", "99999999999999999999", "v1=zz", false)
	svc := &recorder{}
	a := fuzzAdapter(f, svc)
	h := a.Handler()
	f.Fuzz(func(t *testing.T, body, ts, sig string, signed bool) {
		for _, path := range []string{"/slack/events", "/slack/commands", "/slack/interactions"} {
			var r *http.Request
			if signed {
				r = slackfake.Sign(t, "http://baton", path, body, time.Now(), "application/json")
			} else {
				r = httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
				r.Header.Set("X-Slack-Request-Timestamp", ts)
				r.Header.Set("X-Slack-Signature", sig)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			switch {
			case !signed && w.Code != http.StatusUnauthorized:
				t.Fatalf("%s with a forged signature answered %d", path, w.Code)
			case signed && w.Code == http.StatusUnauthorized:
				t.Fatalf("%s signed with the secret answered 401", path)
			case w.Code >= 500 && w.Code != http.StatusServiceUnavailable:
				t.Fatalf("%s answered %d", path, w.Code)
			}
		}
		for len(a.work) > 0 {
			a.done((<-a.work).Key) // events are FuzzSlackEvent's
		}
		if !signed && svc.handed() != 0 {
			t.Fatalf("a forged request handed %d things over", svc.handed())
		}
	})
}

// FuzzSlackEvent: any signed body is answered without a server error, and
// every event it holds is handled (parsed, its text made readable, handed
// over) without a panic; the bot's own mention never reaches the service
// (unless a person typed it out, sent as &lt;@UBATON&gt;).
func FuzzSlackEvent(f *testing.F) {
	for _, s := range slackSeeds {
		f.Add(s)
	}
	svc := &recorder{}
	a := fuzzAdapter(f, svc)
	h := a.Handler()
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, slackfake.Sign(t, "http://baton", "/slack/events", body, time.Now(), "application/json"))
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("answered %d: %s", w.Code, w.Body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for len(a.work) > 0 {
			e := <-a.work
			a.done(e.Key)
			ev, err := slackevents.ParseEvent(json.RawMessage(e.Payload), slackevents.OptionNoVerifyToken())
			if err != nil {
				t.Fatalf("an event acknowledged is not readable from the inbox: %v", err)
			}
			_ = a.event(ctx, ev) // the recorder fails nothing; a panic is not recovered
		}
		svc.mu.Lock()
		defer svc.mu.Unlock()
		for _, m := range svc.messages {
			if strings.Contains(m.Text, "<@"+slackfake.BotUser+">") && !strings.Contains(m.Original, "&lt;") {
				t.Fatalf("the bot's mention reached the service: %q", m.Text)
			}
		}
		svc.messages = nil
	})
}
