package discord

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/bwmarrin/discordgo"
	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// actionService records the clicks handed to it and answers each with
// the reply (or error) its value is mapped to.
type actionService struct {
	nopService
	replies map[string]chat.Reply
	errs    map[string]error

	mu      sync.Mutex
	actions []chat.Action // guarded by mu
}

func (s *actionService) HandleAction(_ context.Context, a chat.Action) (chat.Reply, error) {
	s.mu.Lock()
	s.actions = append(s.actions, a)
	s.mu.Unlock()
	return s.replies[a.Value], s.errs[a.Value]
}

func (s *actionService) recorded() []chat.Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]chat.Action(nil), s.actions...)
}

// followupsOf returns the follow-ups sent for interaction id.
func followupsOf(f *discordfake.Server, id string) []discordfake.Followup {
	var out []discordfake.Followup
	for _, fu := range f.Followups() {
		if fu.Interaction == id {
			out = append(out, fu)
		}
	}
	return out
}

// A click is acknowledged with a deferred update, handed to the service
// as the chat.Action inbound messages would make of that thread and that
// person, and the service's reply goes to the clicker alone.
func TestClickHandedToService(t *testing.T) {
	const thread = "7001"
	tests := []struct {
		name  string
		click discordfake.Click
		want  chat.Action
	}{
		{
			name: "in a task's thread",
			click: discordfake.Click{ID: "i1", CustomID: "approve:3.1", User: "42", Name: "alice", Roles: []string{"55", "56"},
				Channel: thread, Guild: discordfake.Guild, Message: "5001"},
			want: chat.Action{Value: "approve:3.1", Channel: "discord:" + discordfake.Text, MsgID: "5001",
				Thread: core.ThreadRef{Platform: core.PlatformDiscord, Team: discordfake.Guild, Channel: discordfake.Text, Thread: thread},
				Author: chat.Author{ID: "discord:42", Name: "alice", Groups: []string{"discord-role:55", "discord-role:56"}}},
		},
		{
			name:  "in a direct message",
			click: discordfake.Click{ID: "i2", CustomID: "stop:9", User: "42", Name: "alice", Channel: discordfake.DM, Message: "5002"},
			want: chat.Action{Value: "stop:9", Channel: "discord:" + discordfake.DM, MsgID: "5002", Direct: true,
				Thread: core.ThreadRef{Platform: core.PlatformDiscord, Channel: discordfake.DM, Thread: discordfake.DM},
				Author: chat.Author{ID: "discord:42", Name: "alice"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const refusal = "Only the person who started this task, an admin or an approver can decide; nothing changed. @everyone"
			svc := &actionService{replies: map[string]chat.Reply{tt.click.CustomID: {Text: refusal}}}
			f, _ := runAdapter(t, svc, Config{GuildID: discordfake.Guild})
			f.AddChannel(discordfake.Channel{ID: thread, Type: 11, GuildID: discordfake.Guild, ParentID: discordfake.Text, Name: "deploy"})
			id := f.Click(tt.click)
			waitFor(t, "the follow-up", func() bool { return len(followupsOf(f, id)) > 0 })
			if diff := cmp.Diff([]string{id + " type=6 flags=0"}, f.Responses()); diff != "" {
				t.Errorf("interaction responses (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]chat.Action{tt.want}, svc.recorded()); diff != "" {
				t.Errorf("actions handed over (-want +got):\n%s", diff)
			}
			want := []discordfake.Followup{{Interaction: id, Flags: 64, HasAllowed: true, Parse: []string{},
				Content: strings.Replace(refusal, "@everyone", "@\u200beveryone", 1)}}
			if diff := cmp.Diff(want, followupsOf(f, id)); diff != "" {
				t.Errorf("follow-ups (-want +got):\n%s", diff)
			}
			if posts := f.Posts(); len(posts) != 0 {
				t.Errorf("the reply was posted for everyone: %+v", posts)
			}
		})
	}
}

// An empty reply sends no follow-up (the message's edit shows the
// outcome); a failure tells the clicker that it went wrong; a click
// acknowledged too late is still handed over, and nothing is sent for it.
func TestClickReplies(t *testing.T) {
	svc := &actionService{
		replies: map[string]chat.Reply{"approve:1.1": {}, "deny:1.1": {Text: "That approval was already decided."}},
		errs:    map[string]error{"retry:1": errors.New("database is locked")},
	}
	f, logs := runAdapter(t, svc, Config{GuildID: discordfake.Guild})
	click := func(id, value string) string {
		return f.Click(discordfake.Click{ID: id, CustomID: value, User: "42", Channel: discordfake.DM, Message: "5001"})
	}
	handed := func(n int) {
		t.Helper()
		waitFor(t, "the click handed over", func() bool { return len(svc.recorded()) >= n })
	}

	quiet := click("i1", "approve:1.1")
	handed(1)
	late := click(discordfake.LateInteraction, "deny:1.1")
	handed(2)
	waitFor(t, "the late click logged", func() bool { return strings.Contains(logs.String(), "acknowledged too late") })
	failed := click("i3", "retry:1")
	waitFor(t, "the failure's follow-up", func() bool { return len(followupsOf(f, failed)) > 0 })
	decided := click("i4", "deny:1.1")
	waitFor(t, "the reply's follow-up", func() bool { return len(followupsOf(f, decided)) > 0 })

	if got := followupsOf(f, quiet); len(got) != 0 {
		t.Errorf("an empty reply was sent: %+v", got)
	}
	if got := followupsOf(f, late); len(got) != 0 {
		t.Errorf("a late click was answered: %+v", got)
	}
	if got := followupsOf(f, failed); len(got) != 1 || got[0].Content != textFailed || got[0].Flags != 64 {
		t.Errorf("failure follow-ups = %+v, want one ephemeral %q", got, textFailed)
	}
	if got := followupsOf(f, decided); len(got) != 1 || got[0].Content != "That approval was already decided." || got[0].Flags != 64 {
		t.Errorf("follow-ups = %+v", got)
	}
	if n := len(svc.recorded()); n != 4 {
		t.Errorf("%d clicks handed over, want 4", n)
	}
}

// PostButtons sends one action row with a button per chat.Button (its
// Action the custom_id), UpdateButtons replaces them, and an update without
// buttons removes them; the text is neutralised as every post's.
func TestPosterButtons(t *testing.T) {
	f := discordfake.New(t)
	a, logs := newAdapter(t, nopService{}, Config{APIURL: f.APIURL()})
	ctx := context.Background()
	approval := []chat.Button{
		{Action: "approve:3.1", Label: "Approve", Style: chat.StylePrimary},
		{Action: "deny:3.1", Label: "Deny", Style: chat.StyleDanger},
		{Action: "always:3.1", Label: "Always allow"},
	}
	id, err := a.PostButtons(ctx, taskThread, "Approval needed @everyone", approval)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.UpdateButtons(ctx, taskThread, id, "Approved by alice.", nil); err != nil {
		t.Fatal(err)
	}
	stop := []chat.Button{{Action: "stop:3", Label: "Stop", Style: chat.StyleDanger}}
	if err := a.UpdateButtons(ctx, taskThread, id, "Working", stop); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, taskThread, id, "Still working"); err != nil {
		t.Fatal(err)
	}

	wantPosts := []discordfake.Message{{Channel: "7001", ID: id, Content: "Approval needed @\u200beveryone", HasAllowed: true, Parse: []string{},
		Files: map[string]string{}, HasComponents: true, Rows: []discordfake.Row{{Buttons: []discordfake.Button{
			{CustomID: "approve:3.1", Label: "Approve", Style: 1},
			{CustomID: "deny:3.1", Label: "Deny", Style: 4},
			{CustomID: "always:3.1", Label: "Always allow", Style: 2},
		}}}}}
	if diff := cmp.Diff(wantPosts, f.Posts()); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}
	edit := func(text string) discordfake.Message {
		return discordfake.Message{Channel: "7001", ID: id, Content: text, HasAllowed: true, Parse: []string{}, Files: map[string]string{}}
	}
	removed, stopped, plain := edit("Approved by alice."), edit("Working"), edit("Still working")
	removed.HasComponents = true
	stopped.HasComponents, stopped.Rows = true, []discordfake.Row{{Buttons: []discordfake.Button{{CustomID: "stop:3", Label: "Stop", Style: 4}}}}
	if diff := cmp.Diff([]discordfake.Message{removed, stopped, plain}, f.Edits()); diff != "" {
		t.Errorf("edits (-want +got):\n%s", diff)
	}
	cur, ok := f.Current(id)
	if !ok || cur.Content != "Still working" || len(cur.Buttons()) != 1 || cur.Buttons()[0].CustomID != "stop:3" {
		t.Errorf("the message now = %+v, want the last text with Stop (a plain update keeps the buttons)", cur)
	}
	if strings.Contains(logs.String(), "left out") {
		t.Errorf("a button was left out:\n%s", logs)
	}
}

// Discord's limits: five buttons a row, custom_id up to 100 characters
// (a longer one would make Discord refuse the message: that button is left
// out), labels up to 80.
func TestButtonLimits(t *testing.T) {
	a, logs := newAdapter(t, nopService{}, Config{Token: "t"})
	var buttons []chat.Button
	for i := range 7 {
		buttons = append(buttons, chat.Button{Action: "a" + strings.Repeat("x", i), Label: strings.Repeat("L", 100)})
	}
	buttons = append(buttons, chat.Button{Action: strings.Repeat("y", 101), Label: "too long"})
	rows := a.components(buttons)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (five buttons, then two)", len(rows))
	}
	var ids []string
	for _, r := range rows {
		for _, c := range r.(discordgo.ActionsRow).Components {
			b := c.(discordgo.Button)
			ids = append(ids, b.CustomID)
			if n := len([]rune(b.Label)); n > maxLabel {
				t.Errorf("label of %d characters", n)
			}
			if b.Style != discordgo.SecondaryButton {
				t.Errorf("style %d, want secondary by default", b.Style)
			}
		}
	}
	if diff := cmp.Diff([]string{"a", "ax", "axx", "axxx", "axxxx", "axxxxx", "axxxxxx"}, ids); diff != "" {
		t.Errorf("custom_ids (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), "left out") {
		t.Errorf("the button left out is not logged:\n%s", logs)
	}
	if a.components(nil) != nil {
		t.Errorf("components of no buttons are not nil")
	}
}
