package discord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/llmtest"
)

// comments returns the stored comments of the task of thread id under
// the text channel, as their texts and originals.
func (w *world) comments(id string) [][2]string {
	w.t.Helper()
	ctx := context.Background()
	task, err := w.sys.Store.TaskByThread(ctx, core.ThreadRef{Platform: core.PlatformDiscord, Team: fakeGuild, Channel: fakeText, Thread: id})
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

func (w *world) jobs(id string) []core.Job {
	w.t.Helper()
	ctx := context.Background()
	task, err := w.sys.Store.TaskByThread(ctx, core.ThreadRef{Platform: core.PlatformDiscord, Team: fakeGuild, Channel: fakeText, Thread: id})
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
func TestTextForTheModel(t *testing.T) {
	w := startWorld(t)
	w.f.dispatch("GUILD_ROLE_CREATE", map[string]any{"guild_id": fakeGuild, "role": map[string]any{"id": "77", "name": "oncall"}})
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Done."))
	const content = "<@" + fakeBot + "> ask <@43> and <@!44> (<@&77>, <@&78>) in <#" + fakeText + "> and <#999> " +
		"about <:party:1234> by <t:1618953630:R> &amp; <@45>"
	id := w.sayWith(fakeText, fakeGuild, "42", content, true, map[string]any{"mentions": []any{
		map[string]any{"id": fakeBot, "username": "baton", "bot": true},
		map[string]any{"id": "43", "username": "bob", "global_name": "Bob B"},
		map[string]any{"id": "44", "username": "carol"},
	}, "mention_roles": []string{"77", "78"}})
	w.waitReaction("+✅ " + fakeText + "/" + id)
	const want = "ask @Bob B and @carol (@oncall, @&78) in #general and #999 about :party: by 2021-04-20T21:20:30Z &amp; @45"
	if req := w.sys.LLM.Requests()[0].Messages[1].Text(); !strings.Contains(req, want) {
		t.Errorf("the model read:\n%s\nwant it to hold %q", req, want)
	}
	_, _, _, threads := w.f.snapshot()
	if len(threads) != 1 || threads[0].Name != chattext.Title(want, 80) {
		t.Errorf("threads = %+v", threads)
	}
	if diff := cmp.Diff([][2]string{{want, content}}, w.comments(id)); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
}

// A sticker is named in the comment; stickers alone in a task's thread
// are a comment, not a new request.
func TestStickerInThread(t *testing.T) {
	w := startWorld(t)
	w.sys.LLM.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "Done.") })
	id := w.say(fakeText, fakeGuild, "42", "<@"+fakeBot+"> deploy", true)
	w.waitReaction("+✅ " + fakeText + "/" + id)
	// Discord's sticker item as documented: id, name, format_type.
	w.sayWith(id, fakeGuild, "42", "", false, map[string]any{"sticker_items": []any{
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
func TestNotNewRequests(t *testing.T) {
	w := startWorld(t)
	w.sys.LLM.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "Done.") })
	botMsg := map[string]any{"id": "6100", "channel_id": fakeText, "type": 0, "content": "I could not open a thread",
		"author": map[string]any{"id": fakeBot, "username": "baton", "bot": true}, "timestamp": "2026-11-30T10:00:00Z"}
	reply := map[string]any{"type": 19, "message_reference": map[string]any{"message_id": "6100", "channel_id": fakeText, "guild_id": fakeGuild},
		"referenced_message": botMsg}
	// A reply that pings the bot: Discord lists it among the mentions.
	w.sayWith(fakeText, fakeGuild, "42", "thanks, that helps", true, reply)
	// A system message (Discord's own account) mentioning the bot.
	w.sayWith(fakeText, fakeGuild, "643945264868098049", "<@"+fakeBot+"> your app was verified", true,
		map[string]any{"author": map[string]any{"id": "643945264868098049", "username": "Discord", "system": true}})
	// A reply that does mention the bot in its text is a request.
	req := w.sayWith(fakeText, fakeGuild, "42", "<@"+fakeBot+"> then please retry", true, reply)
	w.waitReaction("+✅ " + fakeText + "/" + req)
	_, _, _, threads := w.f.snapshot()
	if len(threads) != 1 || threads[0].Message != req {
		t.Errorf("threads = %+v, want one, for the reply mentioning the bot", threads)
	}
	if n := len(w.sys.LLM.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
	if slices.ContainsFunc(w.posts(fakeText), func(p string) bool { return strings.Contains(p, "not allowed") }) {
		t.Errorf("a refusal was posted: %q", w.posts(fakeText))
	}
}

// Channels a message links that the gateway's state does not know cost a
// bounded number of lookups, however many there are.
func TestManyChannelLinksBoundLookups(t *testing.T) {
	w := startWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Done."))
	var b strings.Builder
	b.WriteString("<@" + fakeBot + "> compare")
	for i := range 500 {
		fmt.Fprintf(&b, " <#%d>", 10_000+i)
	}
	w.f.mu.Lock()
	before := w.f.lookups
	w.f.mu.Unlock()
	id := w.say(fakeText, fakeGuild, "42", b.String(), true)
	w.waitReaction("+✅ " + fakeText + "/" + id)
	w.f.mu.Lock()
	n := w.f.lookups - before
	w.f.mu.Unlock()
	if n > maxLookups+1 { // and the new thread's own
		t.Errorf("%d channel lookups for one message, want at most %d", n, maxLookups+1)
	}
	if req := w.sys.LLM.Requests()[0].Messages[1].Text(); !strings.Contains(req, "compare #10000 #10001") || !strings.Contains(req, "#10499") {
		t.Errorf("the model read:\n%.300s", req)
	}
}
