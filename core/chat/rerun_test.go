package chat_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// TestRerunCommand: `!rerun MOVEMENT [--model M]` starts a new job from a
// movement of the thread's last finished job with the state recorded at
// that movement's start, linked to it; a movement the piece lacks, one the
// job never started, a running job and a stranger are refused.
func TestRerunCommand(t *testing.T) {
	w := newWorld(t, chat.Access{})
	ctx := context.Background()
	w.say("alice", "!piece plan-implement-verify write the report")
	j, err := w.store.ActiveJob(ctx, w.task().ID)
	if err != nil {
		t.Fatal(err)
	}
	if j, err = w.store.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	implementState := `{"lessons":[{"movement":"plan","next_step":"implement","lessons":"L1"}],"handover":"H1"}`
	if err := w.store.SaveProgress(ctx, j.ID, 1, core.Progress{Movement: "plan", Events: []core.JobEvent{
		{Kind: "movement_started", Movement: "plan"}, {Kind: core.EventMovementState, Movement: "plan", Detail: `{}`},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := w.store.SaveProgress(ctx, j.ID, 1, core.Progress{Movement: "implement", MovementCount: 1, Lessons: `{"handover":"LATER"}`, Events: []core.JobEvent{
		{Kind: "movement_started", Movement: "implement"}, {Kind: core.EventMovementState, Movement: "implement", Detail: implementState},
	}}); err != nil {
		t.Fatal(err)
	}
	if r := w.say("alice", "!rerun implement"); !strings.Contains(r.Text, "only a finished job") {
		t.Errorf("a re-run of a running job = %q", r.Text)
	}
	if _, err := w.store.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "done"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ who, text, want string }{
		{"alice", "!rerun", "Usage: `!rerun MOVEMENT"},
		{"alice", "!rerun --model m", "Usage: `!rerun MOVEMENT"},
		{"alice", "!rerun deploy", "has no movement deploy"},
		{"alice", "!rerun verify", "never started movement verify"},
		{"alice", "!rerun implement --model bad<name>", "not a model name"},
		{"mallory", "!rerun implement", "Only the person"},
	} {
		if r := w.say(tc.who, tc.text); !strings.Contains(r.Text, tc.want) {
			t.Errorf("%s: %q = %q, want %q", tc.who, tc.text, r.Text, tc.want)
		}
	}
	before := len(w.queue.Enqueued())
	if r := w.say("alice", "!rerun implement --model other-model mind the tests"); r.Text != "" {
		t.Fatalf("rerun = %q", r.Text)
	}
	if got := w.queue.Enqueued(); len(got) != before+1 {
		t.Errorf("enqueued %v, want one more job", got)
	}
	next, err := w.store.ActiveJob(ctx, w.task().ID)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal([]byte(next.Lessons), &state); err != nil {
		t.Fatal(err)
	}
	if next.RetryOf != j.ID || next.Movement != "implement" || state["handover"] != "H1" || state["model"] != "other-model" ||
		!strings.HasSuffix(next.Instruction, "\n\nmind the tests") {
		t.Errorf("the re-run is %+v with state %v; want job %d's implement state, the model and the note", next, state, j.ID)
	}
	evs, err := w.store.Events(ctx, next.ID)
	if err != nil {
		t.Fatal(err)
	}
	var rerun string
	for _, e := range evs {
		if e.Kind == core.EventRerun {
			rerun = e.Detail
		}
	}
	if want := "job " + itoa(j.ID) + " from implement, model other-model, by slack:alice"; rerun != want {
		t.Errorf("the rerun event says %q, want %q", rerun, want)
	}
	if out := strings.Join(w.outbox(), "\n"); !strings.Contains(out, "Re-running job #"+itoa(j.ID)) {
		t.Errorf("the thread was not told of the re-run:\n%s", out)
	}
	if r := w.say("alice", "!rerun implement"); !strings.Contains(r.Text, "only a finished job") && !strings.Contains(r.Text, "#"+itoa(next.ID)) {
		t.Errorf("a re-run while the re-run is queued = %q", r.Text)
	}
}
