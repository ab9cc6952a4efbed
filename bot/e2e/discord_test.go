package e2e_test

// Baton on Discord: the whole stack with the Discord adapter in front of
// a fake Discord (adapters/discord/discordfake), its outbox delivered by
// the deliverer.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/adapters/discord"
	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/outbox"
)

// discordWorld is the whole stack with the Discord adapter on a fake
// Discord.
type discordWorld struct {
	t    testing.TB
	f    *discordfake.Server
	sys  *system
	a    *discord.Adapter
	logs *discordLogs
	msgs int
}

// discordLogs collects the adapter's log lines; safe for concurrent use.
type discordLogs struct {
	mu sync.Mutex
	b  bytes.Buffer // guarded by mu
}

func (l *discordLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *discordLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// discordToken is the bot token the adapter runs with; the test fails if
// it reaches the log.
const discordToken = "secret-token"

// startDiscordWorld starts the stack, and the adapter and the Discord
// deliverer on a new fake Discord, until the end of the test; it returns
// once /baton is registered, the last step of the adapter's start.
func startDiscordWorld(t testing.TB) *discordWorld {
	t.Helper()
	return startDiscordWorldWith(t, stackOptions{})
}

// startDiscordWorldWith is startDiscordWorld with the stack built with
// opts.
func startDiscordWorldWith(t testing.TB, opts stackOptions) *discordWorld {
	t.Helper()
	sys := startStack(t, opts)
	f := discordfake.New(t)
	logs := &discordLogs{}
	a, err := discord.New(sys.Service, discord.Config{
		Token: discordToken, APIURL: f.APIURL(), GuildID: discordfake.Guild, IgnoreBots: true,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
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
		if strings.Contains(logs.String(), discordToken) {
			t.Errorf("the token is in the log:\n%s", logs)
		}
	})
	w := &discordWorld{t: t, f: f, sys: sys, a: a, logs: logs}
	waitFor(t, "/baton registered", func() bool { return len(f.Commands()) > 0 })
	return w
}

// say dispatches a MESSAGE_CREATE from user in channel and returns its id.
func (w *discordWorld) say(channel, guild, user, content string, mention bool) string {
	w.t.Helper()
	return w.sayWith(channel, guild, user, content, mention, nil)
}

// sayWith is say with more fields of the message.
func (w *discordWorld) sayWith(channel, guild, user, content string, mention bool, more map[string]any) string {
	w.t.Helper()
	w.msgs++
	id := fmt.Sprint(7000 + w.msgs)
	m := map[string]any{
		"id": id, "channel_id": channel, "content": content, "type": 0,
		"timestamp": time.Now().UTC().Format(time.RFC3339),
		"author":    map[string]any{"id": user, "username": "user" + user, "bot": user == discordfake.Bot},
		"mentions":  []any{},
	}
	if guild != "" {
		m["guild_id"] = guild
		m["member"] = map[string]any{"roles": []string{"55"}}
	}
	if mention {
		m["mentions"] = []any{map[string]any{"id": discordfake.Bot, "username": "baton", "bot": true}}
	}
	maps.Copy(m, more)
	w.f.Dispatch("MESSAGE_CREATE", m)
	return id
}

// posts returns the texts the bot posted in channel.
func (w *discordWorld) posts(channel string) []string {
	var out []string
	for _, p := range w.f.Posts() {
		if p.Channel == channel {
			out = append(out, p.Content)
		}
	}
	return out
}

func (w *discordWorld) waitReaction(r string) {
	w.t.Helper()
	waitFor(w.t, "reaction "+r, func() bool {
		return slices.Contains(w.f.Reactions(), r)
	})
}

func (w *discordWorld) waitPost(channel, text string) {
	w.t.Helper()
	waitFor(w.t, fmt.Sprintf("a post %q in %s", text, channel), func() bool {
		return slices.ContainsFunc(w.posts(channel), func(p string) bool { return strings.Contains(p, text) })
	})
}

func TestDiscordMentionToAnswer(t *testing.T) {
	w := startDiscordWorld(t)
	intents, commands := w.f.Intents(), w.f.Commands()
	if len(intents) != 1 || intents[0] != int(discord.Intents) || intents[0]&int(discordgo.IntentMessageContent) == 0 {
		t.Errorf("identify intents = %v, want %d with Message Content", intents, discord.Intents)
	}
	if diff := cmp.Diff([]string{"guild 100 /baton status abort retry list policy mcp help"}, commands); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}

	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "The answer is 42."))
	id := w.say(discordfake.Text, discordfake.Guild, "42", "<@"+discordfake.Bot+"> what is the answer?", true)
	w.waitReaction("+✅ " + discordfake.Text + "/" + id)
	w.waitPost(id, "The answer is 42.")

	reactions, threads := w.f.Reactions(), w.f.Threads()
	if diff := cmp.Diff([]discordfake.Thread{{Channel: discordfake.Text, Message: id, Name: "what is the answer?", Type: int(discordgo.ChannelTypeGuildPublicThread)}}, threads); diff != "" {
		t.Errorf("threads (-want +got):\n%s", diff)
	}
	if i, j := slices.Index(reactions, "+👀 "+discordfake.Text+"/"+id), slices.Index(reactions, "+✅ "+discordfake.Text+"/"+id); i < 0 || i > j {
		t.Errorf("reactions = %v, want 👀 then ✅ on the request", reactions)
	}
	task, err := w.sys.Store.TaskByThread(context.Background(), core.ThreadRef{Platform: core.PlatformDiscord, Team: discordfake.Guild, Channel: discordfake.Text, Thread: id})
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
	w.f.Dispatch("INTERACTION_CREATE", map[string]any{
		"id": "i1", "application_id": discordfake.App, "type": 2, "token": "tok", "channel_id": id, "guild_id": discordfake.Guild,
		"member": map[string]any{"user": map[string]any{"id": "42", "username": "alice"}, "roles": []string{}},
		"data":   map[string]any{"id": "c1", "name": "baton", "type": 1, "options": []any{map[string]any{"name": "status", "type": 1}}},
	})
	waitFor(t, "the /baton answer", func() bool { return len(w.f.Answers()) > 0 })
	responses, answers := w.f.Responses(), w.f.Answers()
	if diff := cmp.Diff([]string{"i1 type=4 flags=64"}, responses); diff != "" {
		t.Errorf("interaction responses (-want +got):\n%s", diff)
	}
	if len(answers) != 1 || !strings.Contains(answers[0], "Task #1 — job #1 succeeded") {
		t.Errorf("status answer = %q", answers)
	}
}

func TestDiscordAskResumesOnce(t *testing.T) {
	w := startDiscordWorld(t)
	w.sys.LLM.Script(llmtest.Transition("ASK", "need a year", "question", "Which year?"))
	id := w.say(discordfake.Text, discordfake.Guild, "42", "<@"+discordfake.Bot+"> make the report", true)
	w.waitPost(id, "Which year?")
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Report for 2025."))
	w.say(id, discordfake.Guild, "42", "2025", false) // a reply in the thread, no mention
	w.waitPost(id, "Report for 2025.")
	w.waitReaction("+✅ " + discordfake.Text + "/" + id)
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

func TestDiscordOwnMessageIgnored(t *testing.T) {
	w := startDiscordWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "ok"))
	w.say(discordfake.Text, discordfake.Guild, discordfake.Bot, "<@"+discordfake.Bot+"> talking to myself", true)
	// Messages of one channel are handled in order: once the next request
	// is answered, the bot's own message was long dropped.
	id := w.say(discordfake.Text, discordfake.Guild, "42", "<@"+discordfake.Bot+"> hello", true)
	w.waitReaction("+✅ " + discordfake.Text + "/" + id)
	threads := w.f.Threads()
	if len(threads) != 1 || threads[0].Message != id {
		t.Errorf("threads = %+v, want one for %s", threads, id)
	}
	if n := len(w.sys.LLM.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
}

func TestDiscordDirectMessageWithOnlyAFile(t *testing.T) {
	w := startDiscordWorld(t)
	url := w.f.AddFile("notes.txt", "remember the milk")
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Hi there."))
	id := w.sayWith(discordfake.DM, "", "42", "", false, map[string]any{"attachments": []any{map[string]any{
		"id": "a1", "filename": "notes.txt", "size": 17, "url": url,
	}}})
	w.waitPost(discordfake.DM, "Hi there.")
	w.waitReaction("+✅ " + discordfake.DM + "/" + id)
	task, err := w.sys.Store.TaskByThread(context.Background(), core.ThreadRef{Platform: core.PlatformDiscord, Channel: discordfake.DM, Thread: discordfake.DM})
	if err != nil {
		t.Fatalf("no task for the DM channel: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(task.Workspace, "input", "notes.txt"))
	if err != nil || string(b) != "remember the milk" {
		t.Errorf("input/notes.txt = %q, %v", b, err)
	}
}

func TestDiscordMentionInExistingThread(t *testing.T) {
	w := startDiscordWorld(t)
	const thread = "250"
	w.f.AddChannel(discordfake.Channel{ID: thread, Type: 11, GuildID: discordfake.Guild, ParentID: discordfake.Text, Name: "login bug"})
	w.f.SetHistory(thread, []map[string]any{ // newest first, as Discord lists them
		{"id": "6002", "channel_id": thread, "type": 0, "content": "it fails since Monday", "timestamp": "2026-11-30T10:01:00Z", "author": map[string]any{"id": "43", "username": "bob"}},
		{"id": "6001", "channel_id": thread, "type": 0, "content": "the login page is broken", "timestamp": "2026-11-30T10:00:00Z", "author": map[string]any{"id": "43", "username": "bob"}},
	})
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Fixed."))
	id := w.say(thread, discordfake.Guild, "42", "<@"+discordfake.Bot+"> please fix this", true)
	w.waitReaction("+✅ " + thread + "/" + id) // the request lives in the thread
	w.waitPost(thread, "Fixed.")
	threads := w.f.Threads()
	if len(threads) != 0 {
		t.Errorf("a thread was created inside a thread: %+v", threads)
	}
	requests := w.f.Requests()
	if diff := cmp.Diff([]string{"history " + thread}, requests); diff != "" {
		t.Errorf("history requests (-want +got):\n%s", diff)
	}
	user := w.sys.LLM.Requests()[0].Messages[1].Text()
	if i, j := strings.Index(user, "the login page is broken"), strings.Index(user, "it fails since Monday"); i < 0 || j < i {
		t.Errorf("the thread's earlier messages are not in the request, in order:\n%s", user)
	}
}

func TestDiscordAbort(t *testing.T) {
	tests := []struct {
		name  string
		abort func(w *discordWorld, request string)
	}{
		{"/baton abort in the thread", func(w *discordWorld, request string) {
			w.f.Dispatch("INTERACTION_CREATE", map[string]any{
				"id": "i2", "application_id": discordfake.App, "type": 2, "token": "tok", "channel_id": request, "guild_id": discordfake.Guild,
				"member": map[string]any{"user": map[string]any{"id": "42", "username": "alice"}, "roles": []string{}},
				"data":   map[string]any{"id": "c1", "name": "baton", "type": 1, "options": []any{map[string]any{"name": "abort", "type": 1}}},
			})
		}},
		{"❌ on the request", func(w *discordWorld, request string) {
			reaction := func(user string) map[string]any {
				return map[string]any{"user_id": user, "message_id": request, "channel_id": discordfake.Text, "guild_id": discordfake.Guild,
					"emoji": map[string]any{"name": "❌"}, "member": map[string]any{"user": map[string]any{"id": user, "username": "alice"}}}
			}
			w.f.Dispatch("MESSAGE_REACTION_ADD", reaction(discordfake.Bot)) // the bot's own: ignored
			w.f.Dispatch("MESSAGE_REACTION_ADD", reaction("42"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := startDiscordWorld(t)
			w.sys.LLM.Script(llmtest.Transition("COMPLETE", "late answer").After(time.Hour))
			id := w.say(discordfake.Text, discordfake.Guild, "42", "<@"+discordfake.Bot+"> take your time", true)
			w.waitReaction("+👀 " + discordfake.Text + "/" + id)
			waitFor(t, "the slow model call", func() bool { return len(w.sys.LLM.Requests()) > 0 })
			tt.abort(w, id)
			w.waitPost(id, "was aborted by")
			w.waitReaction("+❌ " + discordfake.Text + "/" + id)
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

func TestDiscordLongAnswerSplit(t *testing.T) {
	w := startDiscordWorld(t)
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
	id := w.say(discordfake.Text, discordfake.Guild, "42", "<@"+discordfake.Bot+"> explain", true)
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

func TestDiscordThreadRefused(t *testing.T) {
	w := startDiscordWorld(t)
	w.f.AddChannel(discordfake.Channel{ID: discordfake.NoThreads, Type: 0, GuildID: discordfake.Guild, Name: "locked-down"})
	w.say(discordfake.NoThreads, discordfake.Guild, "42", "<@"+discordfake.Bot+"> help", true)
	w.waitPost(discordfake.NoThreads, "I lack the Create Public Threads")
	if !strings.Contains(w.logs.String(), "Baton lacks a permission") {
		t.Errorf("no clear log line:\n%s", w.logs)
	}
	if jobs, _ := w.sys.Store.Jobs(context.Background(), core.JobFilter{}); len(jobs) != 0 {
		t.Errorf("a job started without a thread: %+v", jobs)
	}
}

// comments returns the stored comments of the task of thread id under
// the text channel, as their texts and originals.
func (w *discordWorld) comments(id string) [][2]string {
	w.t.Helper()
	ctx := context.Background()
	task, err := w.sys.Store.TaskByThread(ctx, core.ThreadRef{Platform: core.PlatformDiscord, Team: discordfake.Guild, Channel: discordfake.Text, Thread: id})
	if err != nil {
		return nil
	}
	cs, err := w.sys.Store.RecentComments(ctx, task.ID, 50)
	if err != nil {
		w.t.Fatal(err)
	}
	var out [][2]string
	for _, c := range cs {
		if c.Role == core.RoleUser {
			out = append(out, [2]string{c.Text, c.Original})
		}
	}
	return out
}

func (w *discordWorld) jobs(id string) []core.Job {
	w.t.Helper()
	ctx := context.Background()
	task, err := w.sys.Store.TaskByThread(ctx, core.ThreadRef{Platform: core.PlatformDiscord, Team: discordfake.Guild, Channel: discordfake.Text, Thread: id})
	if err != nil {
		return nil
	}
	jobs, err := w.sys.Store.Jobs(ctx, core.JobFilter{TaskID: task.ID})
	if err != nil {
		w.t.Fatal(err)
	}
	return jobs
}

// The model reads Discord's markup as people see it: users by the names
// the message's mentions give, roles and channels by theirs, custom emoji
// and timestamps; the comment keeps the original.
func TestDiscordTextForTheModel(t *testing.T) {
	w := startDiscordWorld(t)
	w.f.Dispatch("GUILD_ROLE_CREATE", map[string]any{"guild_id": discordfake.Guild, "role": map[string]any{"id": "77", "name": "oncall"}})
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Done."))
	const content = "<@" + discordfake.Bot + "> ask <@43> and <@!44> (<@&77>, <@&78>) in <#" + discordfake.Text + "> and <#999> " +
		"about <:party:1234> by <t:1618953630:R> &amp; <@45>"
	id := w.sayWith(discordfake.Text, discordfake.Guild, "42", content, true, map[string]any{"mentions": []any{
		map[string]any{"id": discordfake.Bot, "username": "baton", "bot": true},
		map[string]any{"id": "43", "username": "bob", "global_name": "Bob B"},
		map[string]any{"id": "44", "username": "carol"},
	}, "mention_roles": []string{"77", "78"}})
	w.waitReaction("+✅ " + discordfake.Text + "/" + id)
	const want = "ask @Bob B and @carol (@oncall, @&78) in #general and #999 about :party: by 2021-04-20T21:20:30Z &amp; @45"
	if req := w.sys.LLM.Requests()[0].Messages[1].Text(); !strings.Contains(req, want) {
		t.Errorf("the model read:\n%s\nwant it to hold %q", req, want)
	}
	threads := w.f.Threads()
	if len(threads) != 1 || threads[0].Name != chattext.Title(want, 80) {
		t.Errorf("threads = %+v", threads)
	}
	if diff := cmp.Diff([][2]string{{want, content}}, w.comments(id)); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
}

// A sticker is named in the comment; stickers alone in a task's thread
// are a comment, not a new request.
func TestDiscordStickerInThread(t *testing.T) {
	w := startDiscordWorld(t)
	w.sys.LLM.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "Done.") })
	id := w.say(discordfake.Text, discordfake.Guild, "42", "<@"+discordfake.Bot+"> deploy", true)
	w.waitReaction("+✅ " + discordfake.Text + "/" + id)
	// Discord's sticker item as documented: id, name, format_type.
	w.sayWith(id, discordfake.Guild, "42", "", false, map[string]any{"sticker_items": []any{
		map[string]any{"id": "749054660769218631", "name": "Wave", "format_type": 1}}})
	waitFor(t, "the sticker stored", func() bool { return len(w.comments(id)) >= 2 })
	if jobs := w.jobs(id); len(jobs) != 1 {
		t.Errorf("%d jobs after a sticker, want the first only", len(jobs))
	}
	if got := w.comments(id); got[1] != [2]string{"[sticker: Wave]", ""} {
		t.Errorf("comments = %q", got)
	}
}

// Replies to the bot's own messages are not mentions unless their text
// mentions the bot, and Discord's system user is not a person.
func TestDiscordNotNewRequests(t *testing.T) {
	w := startDiscordWorld(t)
	w.sys.LLM.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "Done.") })
	botMsg := map[string]any{"id": "6100", "channel_id": discordfake.Text, "type": 0, "content": "I could not open a thread",
		"author": map[string]any{"id": discordfake.Bot, "username": "baton", "bot": true}, "timestamp": "2026-11-30T10:00:00Z"}
	reply := map[string]any{"type": 19, "message_reference": map[string]any{"message_id": "6100", "channel_id": discordfake.Text, "guild_id": discordfake.Guild},
		"referenced_message": botMsg}
	// A reply that pings the bot: Discord lists it among the mentions.
	w.sayWith(discordfake.Text, discordfake.Guild, "42", "thanks, that helps", true, reply)
	// A system message (Discord's own account) mentioning the bot.
	w.sayWith(discordfake.Text, discordfake.Guild, "643945264868098049", "<@"+discordfake.Bot+"> your app was verified", true,
		map[string]any{"author": map[string]any{"id": "643945264868098049", "username": "Discord", "system": true}})
	// A reply that does mention the bot in its text is a request.
	req := w.sayWith(discordfake.Text, discordfake.Guild, "42", "<@"+discordfake.Bot+"> then please retry", true, reply)
	w.waitReaction("+✅ " + discordfake.Text + "/" + req)
	threads := w.f.Threads()
	if len(threads) != 1 || threads[0].Message != req {
		t.Errorf("threads = %+v, want one, for the reply mentioning the bot", threads)
	}
	if n := len(w.sys.LLM.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
	if slices.ContainsFunc(w.posts(discordfake.Text), func(p string) bool { return strings.Contains(p, "not allowed") }) {
		t.Errorf("a refusal was posted: %q", w.posts(discordfake.Text))
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline (a hang, not a slow machine).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
