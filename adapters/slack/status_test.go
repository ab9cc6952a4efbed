package slack

import (
	"context"
	"testing"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/google/go-cmp/cmp"
)

// TestAssistantThreadStatus: in an assistant thread (a thread of a direct
// message with the app) a job's progress sets the thread's status as it
// changes — thinking, the running call, the answer — and clears it at the
// end; a channel's thread gets none, and a thread where Slack refuses the
// status is not asked again while the progress itself goes on.
func TestAssistantThreadStatus(t *testing.T) {
	ctx := context.Background()
	f := slackfake.NewServer(t)
	p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL(), Locale: "en"})
	dm := core.ThreadRef{Platform: core.PlatformSlack, Team: slackfake.Team, Channel: "D1", Thread: "1700000000.000100"}
	plan := []chat.ProgressStep{{ID: "movement:answer", Title: "answer", State: chat.StepInProgress}}
	views := []chat.ProgressView{
		{JobID: 1, Version: 1, Piece: "chat", Plan: plan, Current: 1},
		{JobID: 1, Version: 2, Piece: "chat", Plan: plan, Current: 1, Tools: []chat.ProgressStep{{ID: "tool:c1", Title: "Read core/job.go", State: chat.StepInProgress}}},
		{JobID: 1, Version: 3, Piece: "chat", Plan: plan, Current: 1, Tools: []chat.ProgressStep{{ID: "tool:c1", Title: "Read core/job.go", State: chat.StepInProgress}}},
		{JobID: 1, Version: 4, Piece: "chat", Plan: plan, Current: 1, Text: "The job", Tools: []chat.ProgressStep{{ID: "tool:c1", Title: "Read core/job.go", State: chat.StepComplete}}},
		{JobID: 1, Version: 5, Piece: "chat", Plan: plan, Current: 1, Final: true},
	}
	msg := ""
	for _, v := range views {
		id, _, err := p.Progress(ctx, dm, msg, v, "done")
		if err != nil {
			t.Fatalf("Progress(version %d): %v", v.Version, err)
		}
		msg = id
	}
	var got []string
	for _, c := range f.Recorded("assistant.threads.setStatus") {
		if c.Channel != "D1" || c.ThreadTS != dm.Thread {
			t.Errorf("status set in %s/%s, want D1/%s", c.Channel, c.ThreadTS, dm.Thread)
		}
		got = append(got, c.Text)
	}
	want := []string{"is thinking…", "is running Read core/job.go…", "is writing the answer…", ""}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("statuses (-want +got):\n%s", d)
	}
	if n := len(f.Recorded("chat.startStream", "chat.stopStream")); n != 2 {
		t.Errorf("%d start/stop calls, want the stream started and stopped", n)
	}

	// A channel's thread has no assistant status.
	if _, _, err := p.Progress(ctx, thread("1700000000.000200"), "", views[0], ""); err != nil {
		t.Fatal(err)
	}
	// A thread where Slack refuses it is not asked again.
	f.Fail("assistant.threads.setStatus", "not_allowed")
	other := dm
	other.Thread = "1700000000.000300"
	for _, v := range views[:2] {
		if _, _, err := p.Progress(ctx, other, "", v, ""); err != nil {
			t.Fatalf("progress with the status refused: %v", err)
		}
	}
	f.Fail("assistant.threads.setStatus", "") // Slack would take it now
	if _, _, err := p.Progress(ctx, other, "", views[3], ""); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Recorded("assistant.threads.setStatus")); n != len(want) {
		t.Errorf("%d status calls in all, want %d (none in a channel, none after a refusal)", n, len(want))
	}
}
