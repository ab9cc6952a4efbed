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

// finishedRun is a finished plan-implement-verify job of the world's
// thread that recorded its state at implement's start.
func (w *world) finishedRun() core.Job {
	w.t.Helper()
	ctx := context.Background()
	w.say("alice", "!piece plan-implement-verify write the report")
	j, err := w.store.ActiveJob(ctx, w.task().ID)
	if err != nil {
		w.t.Fatal(err)
	}
	if j, err = w.store.StartJob(ctx, j.ID, 1); err != nil {
		w.t.Fatal(err)
	}
	if err := w.store.SaveProgress(ctx, j.ID, 1, core.Progress{Movement: "implement", MovementCount: 1, Events: []core.JobEvent{
		{Kind: "movement_started", Movement: "implement"}, {Kind: core.EventMovementState, Movement: "implement", Detail: `{"handover":"H1"}`},
	}}); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.store.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "done"}); err != nil {
		w.t.Fatal(err)
	}
	return j
}

// TestRerunModelAliases: with llm.models set, a re-run names a model by
// its alias (the job asks the model it stands for) or by that model; any
// other name is refused with the aliases listed, and no job starts.
func TestRerunModelAliases(t *testing.T) {
	w := newWorld(t, chat.Access{}, func(c *chat.Config) { c.Models = map[string]string{"fast": "gpt-4o-mini", "strong": "o3"} })
	ctx := context.Background()
	first := w.finishedRun()
	before := len(w.queue.Enqueued())
	if r := w.say("alice", "!rerun implement --model gpt-5-pro"); !strings.Contains(r.Text, "gpt-5-pro is none of the models") || !strings.Contains(r.Text, "fast, strong") {
		t.Errorf("an unlisted model = %q, want a refusal naming the aliases", r.Text)
	}
	if got := len(w.queue.Enqueued()); got != before {
		t.Errorf("a refused re-run enqueued %d jobs", got-before)
	}
	modelOf := func(j core.Job) any {
		var state map[string]any
		if err := json.Unmarshal([]byte(j.Lessons), &state); err != nil {
			t.Fatal(err)
		}
		return state["model"]
	}
	if r := w.say("alice", "!rerun implement --model fast"); r.Text != "" {
		t.Fatalf("--model fast: %q", r.Text)
	}
	next, err := w.store.ActiveJob(ctx, w.task().ID)
	if err != nil {
		t.Fatal(err)
	}
	if m := modelOf(next); m != "gpt-4o-mini" {
		t.Errorf("--model fast: the re-run asks %v, want gpt-4o-mini", m)
	}
	if _, err := w.store.StartJob(ctx, next.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.FinishJob(ctx, next.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "again"}); err != nil {
		t.Fatal(err)
	}
	// The model an alias stands for, as the dashboard may send it.
	again, err := w.svc.Rerun(ctx, chat.Rerun{JobID: first.ID, Movement: "implement", Model: "o3", By: "ui"})
	if err != nil {
		t.Fatalf("--model o3: %v", err)
	}
	if m := modelOf(again); m != "o3" {
		t.Errorf("--model o3: the re-run asks %v", m)
	}
}
