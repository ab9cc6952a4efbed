package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// TestDiscordProgressEmbed: a job's progress on Discord is one message
// whose embed is edited with the movements and the last tool calls, at
// most once every 2 s in the channel; the answer is a post of its own,
// once.
func TestDiscordProgressEmbed(t *testing.T) {
	w := startDiscordWorldWith(t, stackOptions{Progress: map[core.Platform]chat.ProgressSettings{
		core.PlatformDiscord: {Stream: true, Interval: 2 * time.Second},
	}})
	script := progressScript(20, "Discord answer.")
	script[2] = script[2].After(2500 * time.Millisecond) // an edit while implement runs
	w.sys.LLM.Script(script...)
	id := w.say(discordfake.Text, discordfake.Guild, "42", "<@"+discordfake.Bot+"> !piece plan-implement-verify build it", true)
	w.waitReaction("+✅ " + discordfake.Text + "/" + id)
	w.waitPost(id, "Discord answer.")
	var progress []discordfake.Message
	waitFor(t, "the final progress edit", func() bool {
		progress = nil
		for _, m := range append(w.f.Posts(), w.f.Edits()...) {
			if len(m.Embeds) > 0 {
				progress = append(progress, m)
			}
		}
		return len(progress) > 0 && strings.Contains(progress[len(progress)-1].Embeds[0].Title, "verify (3/3)")
	})

	var posted int
	for _, m := range w.f.Posts() {
		if len(m.Embeds) > 0 {
			posted++
		}
	}
	if posted != 1 || len(progress) < 2 {
		t.Fatalf("%d progress posts and %d edits, want one post edited", posted, len(progress)-posted)
	}
	for _, m := range progress[1:] {
		if m.ID != progress[0].ID {
			t.Errorf("an edit of %s, want the progress message %s", m.ID, progress[0].ID)
		}
	}
	for i := 1; i < len(progress); i++ {
		if gap := progress[i].At.Sub(progress[i-1].At); gap < 2*time.Second {
			t.Errorf("progress update %d came %s after the one before: want at least 2s", i, gap)
		}
	}
	last := progress[len(progress)-1].Embeds[0].Description
	for _, want := range []string{"✓ **plan**", "✓ **implement**", "✓ **verify**", "✓ `Bash: echo 19`"} {
		if !strings.Contains(last, want) {
			t.Errorf("the last progress %q lacks %q", last, want)
		}
	}
	if strings.Contains(last, "echo 10`") {
		t.Errorf("the last progress shows more than the last few tool calls: %q", last)
	}
	mid := false
	for _, m := range progress {
		if strings.Contains(m.Embeds[0].Title, "implement (2/3)") || strings.Contains(m.Embeds[0].Title, "plan (1/3)") {
			mid = true
		}
	}
	if !mid {
		t.Errorf("no progress update showed the job under way: %+v", progress)
	}
	n := 0
	for _, p := range w.posts(id) {
		if strings.Contains(p, "Discord answer.") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the answer was posted %d times, want once", n)
	}
}
