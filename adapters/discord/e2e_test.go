package discord

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat/chattest"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/outbox"
)

// world is the whole stack with the Discord adapter on a fake Discord.
type world struct {
	t    testing.TB
	f    *fakeDiscord
	sys  *chattest.System
	a    *Adapter
	logs *logBuffer
	msgs int
}

func startWorld(t testing.TB) *world {
	t.Helper()
	sys := chattest.Start(t, chattest.Options{})
	f := newFake(t)
	a, logs := newAdapter(t, sys.Service, Config{APIURL: f.apiURL(), GuildID: fakeGuild, IgnoreBots: true})
	d := outbox.New(sys.Store, core.PlatformDiscord, a, outbox.Config{Split: chattext.Split, Poll: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	runErr, delivered := make(chan error, 1), make(chan struct{})
	go func() { runErr <- a.Run(ctx) }()
	go func() { defer close(delivered); _ = d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
		<-delivered
	})
	w := &world{t: t, f: f, sys: sys, a: a, logs: logs}
	waitFor(t, "/baton registered", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.commands) > 0
	})
	return w
}

// say dispatches a MESSAGE_CREATE from user in channel and returns its id.
func (w *world) say(channel, guild, user, content string, mention bool) string {
	w.t.Helper()
	return w.sayWith(channel, guild, user, content, mention, nil)
}

// sayWith is say with more fields of the message.
func (w *world) sayWith(channel, guild, user, content string, mention bool, more map[string]any) string {
	w.t.Helper()
	w.msgs++
	id := fmt.Sprint(7000 + w.msgs)
	m := map[string]any{
		"id": id, "channel_id": channel, "content": content, "type": 0,
		"timestamp": time.Now().UTC().Format(time.RFC3339),
		"author":    map[string]any{"id": user, "username": "user" + user, "bot": user == fakeBot},
		"mentions":  []any{},
	}
	if guild != "" {
		m["guild_id"] = guild
		m["member"] = map[string]any{"roles": []string{"55"}}
	}
	if mention {
		m["mentions"] = []any{map[string]any{"id": fakeBot, "username": "baton", "bot": true}}
	}
	maps.Copy(m, more)
	w.f.dispatch("MESSAGE_CREATE", m)
	return id
}

// threadPosts returns the texts the bot posted in channel.
func (w *world) posts(channel string) []string {
	posts, _, _, _ := w.f.snapshot()
	var out []string
	for _, p := range posts {
		if p.Channel == channel {
			out = append(out, p.Content)
		}
	}
	return out
}

func (w *world) waitReaction(r string) {
	w.t.Helper()
	waitFor(w.t, "reaction "+r, func() bool {
		_, _, reactions, _ := w.f.snapshot()
		return slices.Contains(reactions, r)
	})
}

func (w *world) waitPost(channel, text string) {
	w.t.Helper()
	waitFor(w.t, fmt.Sprintf("a post %q in %s", text, channel), func() bool {
		return slices.ContainsFunc(w.posts(channel), func(p string) bool { return strings.Contains(p, text) })
	})
}

func TestMentionToAnswer(t *testing.T) {
	w := startWorld(t)
	w.f.mu.Lock()
	intents, commands := w.f.intents, w.f.commands
	w.f.mu.Unlock()
	if len(intents) != 1 || intents[0] != int(Intents) || intents[0]&int(discordgo.IntentMessageContent) == 0 {
		t.Errorf("identify intents = %v, want %d with Message Content", intents, Intents)
	}
	if diff := cmp.Diff([]string{"guild 100 /baton status abort retry list help"}, commands); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}

	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "The answer is 42."))
	id := w.say(fakeText, fakeGuild, "42", "<@"+fakeBot+"> what is the answer?", true)
	w.waitReaction("+✅ " + fakeText + "/" + id)
	w.waitPost(id, "The answer is 42.")

	_, _, reactions, threads := w.f.snapshot()
	if diff := cmp.Diff([]threadStart{{Channel: fakeText, Message: id, Name: "what is the answer?", Type: int(discordgo.ChannelTypeGuildPublicThread)}}, threads); diff != "" {
		t.Errorf("threads (-want +got):\n%s", diff)
	}
	if i, j := slices.Index(reactions, "+👀 "+fakeText+"/"+id), slices.Index(reactions, "+✅ "+fakeText+"/"+id); i < 0 || i > j {
		t.Errorf("reactions = %v, want 👀 then ✅ on the request", reactions)
	}
	task, err := w.sys.Store.TaskByThread(context.Background(), core.ThreadRef{Platform: core.PlatformDiscord, Team: fakeGuild, Channel: fakeText, Thread: id})
	if err != nil {
		t.Fatalf("no task keyed by the thread: %v", err)
	}
	if task.OwnerUser != "discord:42" {
		t.Errorf("owner = %q", task.OwnerUser)
	}
	reqs := w.sys.LLM.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].Messages[len(reqs[0].Messages)-1].Text(), "what is the answer?") || strings.Contains(reqs[0].Messages[len(reqs[0].Messages)-1].Text(), "<@") {
		t.Errorf("the request did not reach the model without the mention")
	}
	if age := time.Since(w.a.LastEvent()); w.a.LastEvent().IsZero() || age > time.Minute {
		t.Errorf("LastEvent = %v", w.a.LastEvent())
	}

	// /baton status in the task's thread: answered at once, ephemeral.
	w.f.dispatch("INTERACTION_CREATE", map[string]any{
		"id": "i1", "application_id": fakeApp, "type": 2, "token": "tok", "channel_id": id, "guild_id": fakeGuild,
		"member": map[string]any{"user": map[string]any{"id": "42", "username": "alice"}, "roles": []string{}},
		"data":   map[string]any{"id": "c1", "name": "baton", "type": 1, "options": []any{map[string]any{"name": "status", "type": 1}}},
	})
	waitFor(t, "the /baton answer", func() bool {
		w.f.mu.Lock()
		defer w.f.mu.Unlock()
		return len(w.f.answers) > 0
	})
	w.f.mu.Lock()
	responses, answers := w.f.responses, w.f.answers
	w.f.mu.Unlock()
	if diff := cmp.Diff([]string{"i1 type=4 flags=64"}, responses); diff != "" {
		t.Errorf("interaction responses (-want +got):\n%s", diff)
	}
	if len(answers) != 1 || !strings.Contains(answers[0], "Task #1 — job #1 succeeded") {
		t.Errorf("status answer = %q", answers)
	}
}

func TestAskResumesOnce(t *testing.T) {
	w := startWorld(t)
	w.sys.LLM.Script(llmtest.Transition("ASK", "need a year", "question", "Which year?"))
	id := w.say(fakeText, fakeGuild, "42", "<@"+fakeBot+"> make the report", true)
	w.waitPost(id, "Which year?")
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Report for 2025."))
	w.say(id, fakeGuild, "42", "2025", false) // a reply in the thread, no mention
	w.waitPost(id, "Report for 2025.")
	w.waitReaction("+✅ " + fakeText + "/" + id)
	reqs := w.sys.LLM.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2 (the question, the resumed movement)", len(reqs))
	}
	if user := reqs[1].Messages[1].Text(); !strings.Contains(user, "2025") {
		t.Errorf("the answer is not in the resumed prompt:\n%s", user)
	}
	jobs, err := w.sys.Store.Jobs(context.Background(), core.JobFilter{})
	if err != nil || len(jobs) != 1 || jobs[0].State != core.JobSucceeded {
		t.Errorf("jobs = %+v, %v; want one, succeeded", jobs, err)
	}
}

func TestOwnMessageIgnored(t *testing.T) {
	w := startWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "ok"))
	w.say(fakeText, fakeGuild, fakeBot, "<@"+fakeBot+"> talking to myself", true)
	// Messages of one channel are handled in order: once the next request
	// is answered, the bot's own message was long dropped.
	id := w.say(fakeText, fakeGuild, "42", "<@"+fakeBot+"> hello", true)
	w.waitReaction("+✅ " + fakeText + "/" + id)
	_, _, _, threads := w.f.snapshot()
	if len(threads) != 1 || threads[0].Message != id {
		t.Errorf("threads = %+v, want one for %s", threads, id)
	}
	if n := len(w.sys.LLM.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
}

func TestDirectMessageWithOnlyAFile(t *testing.T) {
	w := startWorld(t)
	w.f.mu.Lock()
	w.f.files["notes.txt"] = "remember the milk"
	w.f.mu.Unlock()
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Hi there."))
	id := w.sayWith(fakeDM, "", "42", "", false, map[string]any{"attachments": []any{map[string]any{
		"id": "a1", "filename": "notes.txt", "size": 17, "url": w.f.srv.URL + "/files/notes.txt",
	}}})
	w.waitPost(fakeDM, "Hi there.")
	w.waitReaction("+✅ " + fakeDM + "/" + id)
	task, err := w.sys.Store.TaskByThread(context.Background(), core.ThreadRef{Platform: core.PlatformDiscord, Channel: fakeDM, Thread: fakeDM})
	if err != nil {
		t.Fatalf("no task for the DM channel: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(task.Workspace, "input", "notes.txt"))
	if err != nil || string(b) != "remember the milk" {
		t.Errorf("input/notes.txt = %q, %v", b, err)
	}
}

func TestMentionInExistingThread(t *testing.T) {
	w := startWorld(t)
	const thread = "250"
	w.f.mu.Lock()
	w.f.channels[thread] = map[string]any{"id": thread, "type": 11, "guild_id": fakeGuild, "parent_id": fakeText, "name": "login bug"}
	w.f.history[thread] = []map[string]any{ // newest first, as Discord lists them
		{"id": "6002", "channel_id": thread, "type": 0, "content": "it fails since Monday", "timestamp": "2026-11-30T10:01:00Z", "author": map[string]any{"id": "43", "username": "bob"}},
		{"id": "6001", "channel_id": thread, "type": 0, "content": "the login page is broken", "timestamp": "2026-11-30T10:00:00Z", "author": map[string]any{"id": "43", "username": "bob"}},
	}
	w.f.mu.Unlock()
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Fixed."))
	id := w.say(thread, fakeGuild, "42", "<@"+fakeBot+"> please fix this", true)
	w.waitReaction("+✅ " + thread + "/" + id) // the request lives in the thread
	w.waitPost(thread, "Fixed.")
	_, _, _, threads := w.f.snapshot()
	if len(threads) != 0 {
		t.Errorf("a thread was created inside a thread: %+v", threads)
	}
	w.f.mu.Lock()
	requests := w.f.requests
	w.f.mu.Unlock()
	if diff := cmp.Diff([]string{"history " + thread}, requests); diff != "" {
		t.Errorf("history requests (-want +got):\n%s", diff)
	}
	user := w.sys.LLM.Requests()[0].Messages[1].Text()
	if i, j := strings.Index(user, "the login page is broken"), strings.Index(user, "it fails since Monday"); i < 0 || j < i {
		t.Errorf("the thread's earlier messages are not in the request, in order:\n%s", user)
	}
}

func TestAbort(t *testing.T) {
	tests := []struct {
		name  string
		abort func(w *world, request string)
	}{
		{"/baton abort in the thread", func(w *world, request string) {
			w.f.dispatch("INTERACTION_CREATE", map[string]any{
				"id": "i2", "application_id": fakeApp, "type": 2, "token": "tok", "channel_id": request, "guild_id": fakeGuild,
				"member": map[string]any{"user": map[string]any{"id": "42", "username": "alice"}, "roles": []string{}},
				"data":   map[string]any{"id": "c1", "name": "baton", "type": 1, "options": []any{map[string]any{"name": "abort", "type": 1}}},
			})
		}},
		{"❌ on the request", func(w *world, request string) {
			reaction := func(user string) map[string]any {
				return map[string]any{"user_id": user, "message_id": request, "channel_id": fakeText, "guild_id": fakeGuild,
					"emoji": map[string]any{"name": "❌"}, "member": map[string]any{"user": map[string]any{"id": user, "username": "alice"}}}
			}
			w.f.dispatch("MESSAGE_REACTION_ADD", reaction(fakeBot)) // the bot's own: ignored
			w.f.dispatch("MESSAGE_REACTION_ADD", reaction("42"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := startWorld(t)
			w.sys.LLM.Script(llmtest.Transition("COMPLETE", "late answer").After(time.Hour))
			id := w.say(fakeText, fakeGuild, "42", "<@"+fakeBot+"> take your time", true)
			w.waitReaction("+👀 " + fakeText + "/" + id)
			waitFor(t, "the slow model call", func() bool { return len(w.sys.LLM.Requests()) > 0 })
			tt.abort(w, id)
			w.waitPost(id, "was aborted by")
			w.waitReaction("+❌ " + fakeText + "/" + id)
			jobs, err := w.sys.Store.Jobs(context.Background(), core.JobFilter{})
			if err != nil || len(jobs) != 1 || jobs[0].State != core.JobAborted || jobs[0].AbortedBy != "discord:42" {
				t.Errorf("jobs = %+v, %v; want one, aborted by discord:42", jobs, err)
			}
			for _, p := range w.posts(id) {
				if strings.Contains(p, "late answer") {
					t.Errorf("the answer was posted after the abort: %q", p)
				}
			}
		})
	}
}

func TestLongAnswerSplit(t *testing.T) {
	w := startWorld(t)
	var b strings.Builder
	for i := 0; b.Len() < 2400; i++ {
		fmt.Fprintf(&b, "Paragraph %d explains one more part of the answer in plain words.\n\n", i)
	}
	b.WriteString("```go\n")
	for i := 0; b.Len() < 4900; i++ {
		fmt.Fprintf(&b, "fmt.Println(%d) // one line of the example program\n", i)
	}
	b.WriteString("```\n\nThat is all.")
	answer := b.String()
	if n := utf8.RuneCountInString(answer); n < 4900 || n > 5200 {
		t.Fatalf("answer is %d characters", n)
	}
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", answer))
	id := w.say(fakeText, fakeGuild, "42", "<@"+fakeBot+"> explain", true)
	w.waitPost(id, "That is all.")
	var parts []string
	for _, p := range w.posts(id) {
		if !strings.HasPrefix(p, "⏳") && !strings.HasPrefix(p, "✅") {
			parts = append(parts, p)
		}
	}
	if len(parts) < 3 || len(parts) > 4 {
		t.Fatalf("%d parts, want 3 or 4", len(parts))
	}
	for i, p := range parts {
		if n := utf8.RuneCountInString(p); n > 2000 {
			t.Errorf("part %d has %d characters", i, n)
		}
		if n := strings.Count(p, "```"); n%2 != 0 {
			t.Errorf("part %d has %d fences (unbalanced):\n%s", i, n, p)
		}
	}
	joined := strings.Join(parts, "\n")
	for _, want := range []string{"Paragraph 0 ", "fmt.Println(0)", "That is all."} {
		if !strings.Contains(joined, want) {
			t.Errorf("the parts lack %q", want)
		}
	}
}

func TestDisallowedIntents(t *testing.T) {
	f := newFake(t)
	f.refuse = true
	a, logs := newAdapter(t, nopService{}, Config{APIURL: f.apiURL()})
	err := a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Message Content") {
		t.Fatalf("Run = %v, want an error naming the Message Content intent", err)
	}
	if !strings.Contains(logs.String(), "enable the Message Content intent for the bot in the Developer Portal") {
		t.Errorf("no advice in the log:\n%s", logs)
	}
}

func TestLateInteraction(t *testing.T) {
	w := startWorld(t)
	w.f.dispatch("INTERACTION_CREATE", map[string]any{
		"id": "late", "application_id": fakeApp, "type": 2, "token": "tok", "channel_id": fakeText, "guild_id": fakeGuild,
		"member": map[string]any{"user": map[string]any{"id": "42", "username": "alice"}, "roles": []string{}},
		"data":   map[string]any{"id": "c1", "name": "baton", "type": 1, "options": []any{map[string]any{"name": "list", "type": 1}}},
	})
	waitFor(t, "the late interaction logged", func() bool { return strings.Contains(w.logs.String(), "answered too late") })
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	if len(w.f.answers) != 0 {
		t.Errorf("a late interaction was answered: %q", w.f.answers)
	}
}

func TestThreadRefused(t *testing.T) {
	w := startWorld(t)
	w.f.mu.Lock()
	w.f.channels["210"] = map[string]any{"id": "210", "type": 0, "guild_id": fakeGuild, "name": "locked-down"}
	w.f.mu.Unlock()
	w.say("210", fakeGuild, "42", "<@"+fakeBot+"> help", true)
	w.waitPost("210", "I lack the Create Public Threads")
	if !strings.Contains(w.logs.String(), "Baton lacks a permission") {
		t.Errorf("no clear log line:\n%s", w.logs)
	}
	if jobs, _ := w.sys.Store.Jobs(context.Background(), core.JobFilter{}); len(jobs) != 0 {
		t.Errorf("a job started without a thread: %+v", jobs)
	}
}
