package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

func testCreateJob(t *testing.T, s core.Store) {
	ctx := t.Context()
	task := newTask(t, s)
	old := newJob(t, s)
	in := core.Job{
		ID: 77, TaskID: task.ID, RetryOf: old.ID, Piece: "coding", Instruction: "fix it",
		State: core.JobSucceeded, Movement: "implement", ResumeMovement: "plan", MovementCount: 0,
		Attempt: 9, Failures: 3, WaitSeq: 4, Lessons: `["keep it short"]`, ResultSummary: "x", Error: "y",
		AbortedBy: "U9", AbortRequestedAt: time.Now(), FinishedAt: time.Now(),
	}
	j, err := s.CreateJob(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	want := core.Job{ID: j.ID, TaskID: task.ID, RetryOf: old.ID, Piece: "coding", Instruction: "fix it",
		State: core.JobQueued, Movement: "implement", ResumeMovement: "plan", Lessons: `["keep it short"]`}
	if d := diff(withoutTimes(want), withoutTimes(j)); d != "" {
		t.Errorf("CreateJob:\n%s", d)
	}
	if j.CreatedAt.IsZero() || !j.StartedAt.IsZero() || !j.FinishedAt.IsZero() || !j.AbortRequestedAt.IsZero() {
		t.Errorf("times = created %v started %v finished %v abort %v; want only created", j.CreatedAt, j.StartedAt, j.FinishedAt, j.AbortRequestedAt)
	}
	if d := diff(j, mustJob(t, s, j.ID)); d != "" {
		t.Errorf("Job after CreateJob:\n%s", d)
	}
	if d := diff([]string{core.EventCreated}, eventKinds(t, s, j.ID)); d != "" {
		t.Errorf("events:\n%s", d)
	}

	for name, bad := range map[string]core.Job{
		"missing task":     {TaskID: 999},
		"missing parent":   {TaskID: task.ID, ParentJobID: 999},
		"missing retry of": {TaskID: task.ID, RetryOf: 999},
	} {
		if _, err := s.CreateJob(ctx, bad); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("CreateJob with %s: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := s.Job(ctx, 999); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Job(999): %v, want ErrNotFound", err)
	}
}

func testJobsActiveJobCount(t *testing.T, s core.Store) {
	ctx := t.Context()
	task := newTask(t, s)
	mk := func(parent int64) core.Job {
		j, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, ParentJobID: parent})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	if _, err := s.ActiveJob(ctx, task.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("ActiveJob with no jobs: %v, want ErrNotFound", err)
	}
	j1 := mk(0)
	j2 := mk(0)
	c1 := mk(j2.ID)
	if _, err := s.StartJob(ctx, j2.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestAbort(ctx, j1.ID, "U1"); err != nil {
		t.Fatal(err)
	}
	otherJob := newJob(t, s)

	ids := func(js []core.Job) []int64 {
		var out []int64
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	tests := []struct {
		name string
		f    core.JobFilter
		want []int64
	}{
		{"all", core.JobFilter{}, []int64{otherJob.ID, c1.ID, j2.ID, j1.ID}},
		{"task", core.JobFilter{TaskID: task.ID}, []int64{c1.ID, j2.ID, j1.ID}},
		{"limit", core.JobFilter{TaskID: task.ID, Limit: 2}, []int64{c1.ID, j2.ID}},
		{"parent", core.JobFilter{ParentJobID: j2.ID}, []int64{c1.ID}},
		{"states", core.JobFilter{States: []core.JobState{core.JobRunning, core.JobAborted}}, []int64{j2.ID, j1.ID}},
		{"task and state", core.JobFilter{TaskID: task.ID, States: []core.JobState{core.JobQueued}}, []int64{c1.ID}},
		{"none", core.JobFilter{TaskID: 999}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js, err := s.Jobs(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if d := diff(tt.want, ids(js)); d != "" {
				t.Errorf("Jobs(%+v):\n%s", tt.f, d)
			}
		})
	}

	active, err := s.ActiveJob(ctx, task.ID)
	if err != nil || active.ID != c1.ID {
		t.Errorf("ActiveJob = %d, %v; want the newest active job %d", active.ID, err, c1.ID)
	}
	counts, err := s.CountJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[core.JobState]int64{core.JobQueued: 2, core.JobRunning: 1, core.JobAborted: 1,
		core.JobWaitingHuman: 0, core.JobWaitingSubtasks: 0, core.JobWaitingApproval: 0, core.JobSucceeded: 0, core.JobFailed: 0}
	if d := diff(want, counts); d != "" {
		t.Errorf("CountJobs:\n%s", d)
	}
}

func testEvents(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)
	at := time.Date(2025, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	if err := s.AddEvent(ctx, core.JobEvent{JobID: j.ID, At: at, Kind: "tool_call", Movement: "plan", Detail: "bash ls"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEvent(ctx, core.JobEvent{JobID: j.ID, Kind: core.EventError, Detail: "boom"}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.JobEvent{
		{JobID: j.ID, Kind: core.EventCreated, Detail: "queued"},
		{JobID: j.ID, At: at, Kind: "tool_call", Movement: "plan", Detail: "bash ls"},
		{JobID: j.ID, Kind: core.EventError, Detail: "boom"},
	}
	if d := diff(bareEvents(want), bareEvents(evs)); d != "" {
		t.Errorf("Events:\n%s", d)
	}
	if len(evs) == 3 && (!evs[1].At.Equal(at) || evs[2].At.IsZero() || evs[0].ID >= evs[1].ID) {
		t.Errorf("event times/ids wrong: %+v", evs)
	}
	if err := s.AddEvent(ctx, core.JobEvent{JobID: 999, Kind: "x"}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("AddEvent on a missing job: %v, want ErrNotFound", err)
	}

	// An attempt's events are fenced: recorded while it runs the job,
	// refused once another attempt took it over.
	r := reach(t, s, core.JobRunning)
	if err := s.AddEvent(ctx, core.JobEvent{JobID: r.ID, Kind: "usage", Attempt: 1}); err != nil {
		t.Fatalf("AddEvent of the running attempt: %v", err)
	}
	if _, err := s.StartJob(ctx, r.ID, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEvent(ctx, core.JobEvent{JobID: r.ID, Kind: "late", Attempt: 1}); !errors.Is(err, core.ErrStale) {
		t.Errorf("AddEvent of a stale attempt: %v, want ErrStale", err)
	}
	kinds := []string{core.EventCreated, core.EventClaimed, "usage", core.EventLeaseLost, core.EventClaimed}
	if d := diff(kinds, eventKinds(t, s, r.ID)); d != "" {
		t.Errorf("events with a stale attempt's:\n%s", d)
	}
}

func testStartJob(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)

	started, err := s.StartJob(ctx, j.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if started.State != core.JobRunning || started.Attempt != 1 || started.Failures != 0 || started.StartedAt.IsZero() {
		t.Errorf("started = %+v; want running, attempt 1, no failures, StartedAt set", started)
	}
	for _, stale := range []int64{0, 1} {
		if _, err := s.StartJob(ctx, j.ID, stale); !errors.Is(err, core.ErrStale) {
			t.Errorf("StartJob attempt %d on attempt 1: %v, want ErrStale", stale, err)
		}
	}

	// A graceful requeue counts no failure; the next claim keeps StartedAt.
	if _, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobQueued}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartJob(ctx, j.ID, 1); !errors.Is(err, core.ErrStale) {
		t.Errorf("StartJob replaying attempt 1 after requeue: %v, want ErrStale", err)
	}
	again, err := s.StartJob(ctx, j.ID, 5)
	if err != nil {
		t.Fatal(err)
	}
	if again.Attempt != 5 || again.Failures != 0 || !again.StartedAt.Equal(started.StartedAt) {
		t.Errorf("restarted = %+v; want attempt 5, no failures, first StartedAt %v", again, started.StartedAt)
	}
	want := []string{core.EventCreated, core.EventClaimed, core.EventRequeued, core.EventClaimed}
	if d := diff(want, eventKinds(t, s, j.ID)); d != "" {
		t.Errorf("events:\n%s", d)
	}
	if _, err := s.StartJob(ctx, 999, 1); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("StartJob on a missing job: %v, want ErrNotFound", err)
	}
}

func testStartJobTakeover(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := reach(t, s, core.JobRunning)
	if err := s.SaveProgress(ctx, j.ID, 1, core.Progress{Movement: "implement", MovementCount: 2}); err != nil {
		t.Fatal(err)
	}
	taken, err := s.StartJob(ctx, j.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if taken.State != core.JobRunning || taken.Attempt != 2 || taken.Failures != 1 || taken.Movement != "implement" || taken.MovementCount != 2 {
		t.Errorf("taken over = %+v; want running at attempt 2, one failure, movement kept", taken)
	}
	want := []string{core.EventCreated, core.EventClaimed, core.EventLeaseLost, core.EventClaimed}
	if d := diff(want, eventKinds(t, s, j.ID)); d != "" {
		t.Errorf("events:\n%s", d)
	}

	// The old attempt's writes change nothing.
	before := mustJob(t, s, j.ID)
	if err := s.SaveProgress(ctx, j.ID, 1, core.Progress{Movement: "review"}); !errors.Is(err, core.ErrStale) {
		t.Errorf("stale SaveProgress: %v, want ErrStale", err)
	}
	if _, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "stale answer",
		Comments: []core.Comment{{Role: core.RoleBot, Text: "stale answer"}},
		Outbox:   []core.OutboxMessage{{Kind: core.OutboxPost, Payload: "{}"}}}); !errors.Is(err, core.ErrStale) {
		t.Errorf("stale FinishJob: %v, want ErrStale", err)
	}
	if d := diff(before, mustJob(t, s, j.ID)); d != "" {
		t.Errorf("stale writes changed the job (want before, got after):\n%s", d)
	}
	if cs, _ := s.RecentComments(ctx, j.TaskID, 10); len(cs) != 0 {
		t.Errorf("stale finish stored comments: %v", cs)
	}
	if msgs, _ := s.DueOutbox(ctx, core.PlatformSlack, time.Now(), 0); len(msgs) != 0 {
		t.Errorf("stale finish stored outbox messages: %v", msgs)
	}
	if d := diff(want, eventKinds(t, s, j.ID)); d != "" {
		t.Errorf("stale writes changed events:\n%s", d)
	}

	// A failed run requeued for retry counts, a graceful one does not.
	if _, err := s.FinishJob(ctx, j.ID, 2, core.Finish{To: core.JobQueued, CountFailure: true, Error: "llm down"}); err != nil {
		t.Fatal(err)
	}
	if got := mustJob(t, s, j.ID); got.Failures != 2 || got.Error != "llm down" {
		t.Errorf("after counted requeue: failures %d, error %q; want 2, llm down", got.Failures, got.Error)
	}
	if _, err := s.StartJob(ctx, j.ID, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishJob(ctx, j.ID, 3, core.Finish{To: core.JobQueued}); err != nil {
		t.Fatal(err)
	}
	if got := mustJob(t, s, j.ID); got.Failures != 2 || got.Attempt != 3 {
		t.Errorf("after graceful requeue: failures %d attempt %d; want 2 and 3", got.Failures, got.Attempt)
	}
}

func testSaveProgress(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := reach(t, s, core.JobRunning)
	p := core.Progress{Movement: "review", MovementCount: 3, Iteration: 7, Lessons: `["a","b"]`, PromptTokens: 1200, CompletionTokens: 340}
	if err := s.SaveProgress(ctx, j.ID, 1, p); err != nil {
		t.Fatal(err)
	}
	got := mustJob(t, s, j.ID)
	want := j
	want.Movement, want.MovementCount, want.Iteration, want.Lessons = "review", 3, 7, `["a","b"]`
	want.PromptTokens, want.CompletionTokens = 1200, 340
	if d := diff(want, got); d != "" {
		t.Errorf("after SaveProgress:\n%s", d)
	}
	if err := s.SaveProgress(ctx, j.ID, 2, p); !errors.Is(err, core.ErrStale) {
		t.Errorf("SaveProgress with a future attempt: %v, want ErrStale", err)
	}
	if err := s.SaveProgress(ctx, 999, 1, p); !errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrStale) {
		t.Errorf("SaveProgress on a missing job: %v, want ErrNotFound only", err)
	}
	parked := reach(t, s, core.JobWaitingHuman)
	if err := s.SaveProgress(ctx, parked.ID, parked.Attempt, p); !errors.Is(err, core.ErrStale) {
		t.Errorf("SaveProgress on a waiting job: %v, want ErrStale", err)
	}
	if _, err := s.FinishJob(ctx, 999, 1, core.Finish{To: core.JobSucceeded}); !errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrStale) {
		t.Errorf("FinishJob on a missing job: %v, want ErrNotFound only", err)
	}
}

// testStartJobRace races two claims of one job, attempts 1 and 2, each
// followed by a finish: never do both attempts commit their finish.
func testStartJobRace(t *testing.T, s core.Store) {
	ctx := t.Context()
	for range 30 {
		j := newJob(t, s)
		var wg sync.WaitGroup
		var finished [3]bool
		for attempt := int64(1); attempt <= 2; attempt++ {
			wg.Go(func() {
				if _, err := s.StartJob(ctx, j.ID, attempt); err != nil {
					// Stale when attempt 2 came first; a transition error
					// when attempt 1 had already finished.
					var te *core.TransitionError
					if !errors.Is(err, core.ErrStale) && !errors.As(err, &te) {
						t.Errorf("StartJob %d: %v", attempt, err)
					}
					return
				}
				_, err := s.FinishJob(ctx, j.ID, attempt, core.Finish{To: core.JobSucceeded})
				if err == nil {
					finished[attempt] = true
				} else if !errors.Is(err, core.ErrStale) {
					t.Errorf("FinishJob %d: %v", attempt, err)
				}
			})
		}
		wg.Wait()
		got := mustJob(t, s, j.ID)
		if finished[1] && finished[2] {
			t.Fatalf("job %d: both attempts committed a finish", j.ID)
		}
		if !finished[1] && !finished[2] {
			t.Fatalf("job %d: no attempt finished; job is %+v", j.ID, got)
		}
		if got.State != core.JobSucceeded {
			t.Errorf("job %d is %s, want succeeded", j.ID, got.State)
		}
		if finished[1] && got.Attempt != 1 || finished[2] && got.Attempt != 2 {
			t.Errorf("job %d finished at attempt %d; finishes %v", j.ID, got.Attempt, finished)
		}
	}
}

func testFinishJob(t *testing.T, s core.Store) {
	tests := []struct {
		name   string
		f      core.Finish
		want   func(j core.Job) core.Job
		event  string
		detail string
	}{
		{
			name: "succeeded",
			f:    core.Finish{To: core.JobSucceeded, ResultSummary: "done"},
			want: func(j core.Job) core.Job {
				j.State, j.ResultSummary = core.JobSucceeded, "done"
				return j
			},
			event: core.EventFinished, detail: "succeeded",
		},
		{
			name: "failed",
			f:    core.Finish{To: core.JobFailed, ResultSummary: "cannot", Error: "agent aborted"},
			want: func(j core.Job) core.Job {
				j.State, j.ResultSummary, j.Error = core.JobFailed, "cannot", "agent aborted"
				return j
			},
			event: core.EventFinished, detail: "failed: agent aborted",
		},
		{
			name: "aborted",
			f:    core.Finish{To: core.JobAborted, AbortedBy: "U7"},
			want: func(j core.Job) core.Job {
				j.State, j.AbortedBy = core.JobAborted, "U7"
				return j
			},
			event: core.EventFinished, detail: "aborted",
		},
		{
			name: "waiting human",
			f:    core.Finish{To: core.JobWaitingHuman, Question: "which branch?", ResumeMovement: "plan"},
			want: func(j core.Job) core.Job {
				j.State, j.Question, j.ResumeMovement, j.WaitSeq = core.JobWaitingHuman, "which branch?", "plan", j.WaitSeq+1
				return j
			},
			event: core.EventParked, detail: "waiting_human",
		},
		{
			name: "waiting subtasks",
			f:    core.Finish{To: core.JobWaitingSubtasks, ResumeMovement: "merge"},
			want: func(j core.Job) core.Job {
				j.State, j.ResumeMovement, j.WaitSeq = core.JobWaitingSubtasks, "merge", j.WaitSeq+1
				return j
			},
			event: core.EventParked, detail: "waiting_subtasks",
		},
		{
			name: "requeued",
			f:    core.Finish{To: core.JobQueued},
			want: func(j core.Job) core.Job {
				j.State = core.JobQueued
				return j
			},
			event: core.EventRequeued, detail: "queued",
		},
		{
			name: "requeued as a failure",
			f:    core.Finish{To: core.JobQueued, CountFailure: true, Error: "timeout"},
			want: func(j core.Job) core.Job {
				j.State, j.Failures, j.Error = core.JobQueued, j.Failures+1, "timeout"
				return j
			},
			event: core.EventRequeued, detail: "queued: timeout",
		},
	}
	ctx := t.Context()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := reach(t, s, core.JobRunning)
			got, err := s.FinishJob(ctx, j.ID, j.Attempt, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if d := diff(withoutTimes(tt.want(j)), withoutTimes(got)); d != "" {
				t.Errorf("FinishJob:\n%s", d)
			}
			if d := diff(got, mustJob(t, s, j.ID)); d != "" {
				t.Errorf("stored job differs from the returned one (want returned, got stored):\n%s", d)
			}
			if tt.f.To.Terminal() == got.FinishedAt.IsZero() {
				t.Errorf("FinishedAt = %v for %s", got.FinishedAt, tt.f.To)
			}
			evs, err := s.Events(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			if last.Kind != tt.event || last.Detail != tt.detail {
				t.Errorf("last event = %s %q, want %s %q", last.Kind, last.Detail, tt.event, tt.detail)
			}
		})
	}
}

func testFinishJobWritesEverything(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := reach(t, s, core.JobRunning)
	childTasks := []core.Task{newTask(t, s), newTask(t, s)}
	if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: j.TaskID, Kind: core.OutboxPost, Payload: "status"}); err != nil {
		t.Fatal(err)
	}
	f := core.Finish{
		To: core.JobWaitingSubtasks, ResumeMovement: "merge",
		Children: []core.Job{
			{TaskID: childTasks[0].ID, Piece: "coding", Instruction: "part one", State: core.JobRunning, ParentJobID: 12345},
			{TaskID: childTasks[1].ID, Piece: "research", Instruction: "part two"},
		},
		Comments: []core.Comment{{Role: core.RoleBot, Text: "splitting the work"}},
		Outbox: []core.OutboxMessage{
			{Kind: core.OutboxUpdate, Payload: `{"text":"2 subtasks"}`},
			{Kind: core.OutboxReact, Payload: `{"name":"hourglass"}`, Attempt: 99},
		},
	}
	got, err := s.FinishJob(ctx, j.ID, j.Attempt, f)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != core.JobWaitingSubtasks || got.WaitSeq != 1 {
		t.Errorf("parent = %s wait %d; want waiting_subtasks wait 1", got.State, got.WaitSeq)
	}
	children, err := s.Jobs(ctx, core.JobFilter{ParentJobID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	var gotChildren []core.Job
	for _, c := range children {
		gotChildren = append(gotChildren, core.Job{TaskID: c.TaskID, ParentJobID: c.ParentJobID, Piece: c.Piece, Instruction: c.Instruction, State: c.State})
	}
	wantChildren := []core.Job{
		{TaskID: childTasks[1].ID, ParentJobID: j.ID, Piece: "research", Instruction: "part two", State: core.JobQueued},
		{TaskID: childTasks[0].ID, ParentJobID: j.ID, Piece: "coding", Instruction: "part one", State: core.JobQueued},
	}
	if d := diff(wantChildren, gotChildren); d != "" {
		t.Errorf("children:\n%s", d)
	}
	cs, err := s.RecentComments(ctx, j.TaskID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Text != "splitting the work" || cs[0].Role != core.RoleBot || cs[0].TaskID != j.TaskID {
		t.Errorf("comments = %+v; want the bot comment on the job's task", cs)
	}
	msgs := outboxWhere(t, s, func(m core.OutboxMessage) bool { return m.TaskID == j.TaskID }, bySeq)
	want := []core.OutboxMessage{
		{TaskID: j.TaskID, Seq: 1, Kind: core.OutboxPost, Payload: "status", State: core.OutboxPending},
		{TaskID: j.TaskID, JobID: j.ID, Attempt: j.Attempt, Seq: 2, Kind: core.OutboxUpdate, Payload: `{"text":"2 subtasks"}`, State: core.OutboxPending},
		{TaskID: j.TaskID, JobID: j.ID, Attempt: j.Attempt, Seq: 3, Kind: core.OutboxReact, Payload: `{"name":"hourglass"}`, State: core.OutboxPending},
	}
	if d := diff(want, bareOutbox(msgs)); d != "" {
		t.Errorf("outbox:\n%s", d)
	}
}

// testFinishJobAllOrNothing makes one part of a finish fail and checks
// that nothing of it was written.
func testFinishJobAllOrNothing(t *testing.T, s core.Store) {
	ctx := t.Context()
	tests := []struct {
		name string
		f    func(j core.Job) core.Finish
	}{
		{"child with a missing task", func(j core.Job) core.Finish {
			return core.Finish{To: core.JobWaitingSubtasks, Children: []core.Job{{TaskID: j.TaskID}, {TaskID: 99999}},
				Comments: []core.Comment{{Role: core.RoleBot, Text: "x"}}, Outbox: []core.OutboxMessage{{Kind: core.OutboxPost}}}
		}},
		{"outbox message with a bad kind", func(j core.Job) core.Finish {
			return core.Finish{To: core.JobSucceeded, Comments: []core.Comment{{Role: core.RoleBot, Text: "x"}},
				Outbox: []core.OutboxMessage{{Kind: core.OutboxPost}, {Kind: "shout"}}}
		}},
		{"comment on a missing task", func(j core.Job) core.Finish {
			return core.Finish{To: core.JobWaitingHuman, Question: "q", Comments: []core.Comment{{Role: core.RoleBot, Text: "q"}, {TaskID: 99999}},
				Outbox: []core.OutboxMessage{{Kind: core.OutboxPost}}}
		}},
		{"children without waiting_subtasks", func(j core.Job) core.Finish {
			return core.Finish{To: core.JobSucceeded, Children: []core.Job{{TaskID: j.TaskID}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := reach(t, s, core.JobRunning)
			events := eventKinds(t, s, j.ID)
			if _, err := s.FinishJob(ctx, j.ID, j.Attempt, tt.f(j)); err == nil {
				t.Fatal("FinishJob succeeded, want an error")
			}
			if d := diff(j, mustJob(t, s, j.ID)); d != "" {
				t.Errorf("failed finish changed the job (want before, got after):\n%s", d)
			}
			if d := diff(events, eventKinds(t, s, j.ID)); d != "" {
				t.Errorf("failed finish changed events (want before, got after):\n%s", d)
			}
			if js, _ := s.Jobs(ctx, core.JobFilter{ParentJobID: j.ID}); len(js) != 0 {
				t.Errorf("failed finish created %d children", len(js))
			}
			if cs, _ := s.RecentComments(ctx, j.TaskID, 10); len(cs) != 0 {
				t.Errorf("failed finish stored comments: %+v", cs)
			}
			if msgs := outboxWhere(t, s, func(m core.OutboxMessage) bool { return m.JobID == j.ID || m.TaskID == j.TaskID }, byID); len(msgs) != 0 {
				t.Errorf("failed finish stored %d outbox messages: %+v", len(msgs), msgs)
			}
		})
	}
}

func testFailJob(t *testing.T, s core.Store) {
	ctx := t.Context()
	for _, from := range core.JobStates {
		t.Run(string(from), func(t *testing.T) {
			j := reach(t, s, from)
			events := eventKinds(t, s, j.ID)
			got, err := s.FailJob(ctx, j.ID, "poison job")
			switch {
			case from == core.JobQueued || from == core.JobRunning:
				if err != nil {
					t.Fatal(err)
				}
				want := j
				want.State, want.Error = core.JobFailed, "poison job"
				if d := diff(withoutTimes(want), withoutTimes(got)); d != "" {
					t.Errorf("FailJob:\n%s", d)
				}
				if got.FinishedAt.IsZero() {
					t.Error("FinishedAt not set")
				}
				wantEvents := append(events, core.EventFinished)
				if from == core.JobQueued {
					wantEvents = append(events, core.EventClaimed, core.EventFinished)
				}
				if d := diff(wantEvents, eventKinds(t, s, j.ID)); d != "" {
					t.Errorf("events:\n%s", d)
				}
			case from.Terminal():
				if err != nil {
					t.Fatalf("FailJob on %s: %v, want no error", from, err)
				}
				if d := diff(j, got); d != "" {
					t.Errorf("FailJob changed a terminal job (want before, got after):\n%s", d)
				}
			default:
				var te *core.TransitionError
				if !errors.As(err, &te) || te.From != from || te.To != core.JobFailed {
					t.Errorf("FailJob on %s: %v, want *core.TransitionError %s -> failed", from, err, from)
				}
			}
			if from != core.JobQueued && from != core.JobRunning {
				if d := diff(j, mustJob(t, s, j.ID)); d != "" {
					t.Errorf("job changed (want before, got after):\n%s", d)
				}
			}
		})
	}
	if _, err := s.FailJob(ctx, 999, "x"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("FailJob on a missing job: %v, want ErrNotFound", err)
	}
}

func testResumeJob(t *testing.T, s core.Store) {
	ctx := t.Context()
	for _, from := range []core.JobState{core.JobWaitingHuman, core.JobWaitingSubtasks} {
		t.Run(string(from), func(t *testing.T) {
			j := reach(t, s, from)
			if ok, err := s.ResumeJob(ctx, j.ID, j.WaitSeq-1); ok || err != nil {
				t.Errorf("ResumeJob with an old wait = %v, %v; want false, nil", ok, err)
			}
			var wg sync.WaitGroup
			results := make(chan bool, 5)
			for range 5 {
				wg.Go(func() {
					ok, err := s.ResumeJob(ctx, j.ID, j.WaitSeq)
					if err != nil {
						t.Error(err)
					}
					results <- ok
				})
			}
			wg.Wait()
			close(results)
			n := 0
			for ok := range results {
				if ok {
					n++
				}
			}
			if n != 1 {
				t.Errorf("5 resumes of one wait resumed %d times, want 1", n)
			}
			got := mustJob(t, s, j.ID)
			if got.State != core.JobQueued || got.WaitSeq != j.WaitSeq || got.ResumeMovement != "plan" {
				t.Errorf("resumed job = %+v; want queued with its wait seq and resume movement", got)
			}
			kinds := eventKinds(t, s, j.ID)
			if kinds[len(kinds)-1] != core.EventResumed {
				t.Errorf("events = %v, want resumed last", kinds)
			}

			// The next park needs the next wait seq.
			if _, err := s.StartJob(ctx, j.ID, got.Attempt+1); err != nil {
				t.Fatal(err)
			}
			parked, err := s.FinishJob(ctx, j.ID, got.Attempt+1, core.Finish{To: core.JobWaitingHuman, Question: "again?"})
			if err != nil {
				t.Fatal(err)
			}
			if ok, _ := s.ResumeJob(ctx, j.ID, j.WaitSeq); ok {
				t.Error("the first wait's reply resumed the second wait")
			}
			if ok, err := s.ResumeJob(ctx, j.ID, parked.WaitSeq); !ok || err != nil {
				t.Errorf("ResumeJob on the second wait = %v, %v; want true", ok, err)
			}
		})
	}
	for _, from := range []core.JobState{core.JobQueued, core.JobRunning, core.JobSucceeded, core.JobAborted} {
		j := reach(t, s, from)
		if ok, err := s.ResumeJob(ctx, j.ID, j.WaitSeq); ok || err != nil {
			t.Errorf("ResumeJob on %s = %v, %v; want false, nil", from, ok, err)
		}
		if d := diff(j, mustJob(t, s, j.ID)); d != "" {
			t.Errorf("ResumeJob on %s changed it (want before, got after):\n%s", from, d)
		}
	}
	if _, err := s.ResumeJob(ctx, 999, 1); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("ResumeJob on a missing job: %v, want ErrNotFound", err)
	}
}

func testRequestAbort(t *testing.T, s core.Store) {
	ctx := t.Context()
	for _, from := range core.JobStates {
		t.Run(string(from), func(t *testing.T) {
			j := reach(t, s, from)
			events := eventKinds(t, s, j.ID)
			got, err := s.RequestAbort(ctx, j.ID, "U5")
			if err != nil {
				t.Fatal(err)
			}
			if d := diff(got, mustJob(t, s, j.ID)); d != "" {
				t.Errorf("returned job differs from the stored one (want returned, got stored):\n%s", d)
			}
			switch {
			case from.Terminal():
				if d := diff(j, got); d != "" {
					t.Errorf("abort changed a terminal job (want before, got after):\n%s", d)
				}
				if d := diff(events, eventKinds(t, s, j.ID)); d != "" {
					t.Errorf("abort changed a terminal job's events (want before, got after):\n%s", d)
				}
				return
			case from == core.JobRunning:
				want := j
				want.AbortedBy = "U5"
				if d := diff(withoutTimes(want), withoutTimes(got)); d != "" {
					t.Errorf("abort of a running job:\n%s", d)
				}
				if !got.FinishedAt.IsZero() {
					t.Error("running job got FinishedAt")
				}
				if d := diff(append(events, core.EventAbortAsk), eventKinds(t, s, j.ID)); d != "" {
					t.Errorf("events:\n%s", d)
				}
			default:
				want := j
				want.State, want.AbortedBy = core.JobAborted, "U5"
				if d := diff(withoutTimes(want), withoutTimes(got)); d != "" {
					t.Errorf("abort of a %s job:\n%s", from, d)
				}
				if got.FinishedAt.IsZero() {
					t.Error("aborted job has no FinishedAt")
				}
				if d := diff(append(events, core.EventAbortAsk, core.EventFinished), eventKinds(t, s, j.ID)); d != "" {
					t.Errorf("events:\n%s", d)
				}
			}
			if got.AbortRequestedAt.IsZero() {
				t.Fatal("AbortRequestedAt not set")
			}
			// A second request keeps the first's time and author.
			again, err := s.RequestAbort(ctx, j.ID, "U6")
			if err != nil {
				t.Fatal(err)
			}
			if !again.AbortRequestedAt.Equal(got.AbortRequestedAt) || again.AbortedBy != "U5" {
				t.Errorf("second abort = at %v by %s; want the first's %v by U5", again.AbortRequestedAt, again.AbortedBy, got.AbortRequestedAt)
			}
			if from == core.JobRunning {
				// The worker stops the job; the abort stays recorded.
				done, err := s.FinishJob(ctx, j.ID, j.Attempt, core.Finish{To: core.JobAborted})
				if err != nil {
					t.Fatal(err)
				}
				if done.State != core.JobAborted || done.AbortedBy != "U5" || done.FinishedAt.IsZero() {
					t.Errorf("finished abort = %+v; want aborted by U5 with FinishedAt", done)
				}
			}
		})
	}
	if _, err := s.RequestAbort(ctx, 999, "U1"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("RequestAbort on a missing job: %v, want ErrNotFound", err)
	}
}

// testFinishAfterAbortRequest checks that a run ending just after an abort
// was requested cannot land its result: only aborted (or a requeue) is
// accepted.
func testFinishAfterAbortRequest(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)
	if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestAbort(ctx, j.ID, "slack:U1"); err != nil {
		t.Fatal(err)
	}
	_, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "late answer",
		Outbox: []core.OutboxMessage{{Kind: core.OutboxPost, Payload: "late"}}})
	if !errors.Is(err, core.ErrAborted) {
		t.Fatalf("finish succeeded after abort: err %v, want ErrAborted", err)
	}
	if got := mustJob(t, s, j.ID); got.State != core.JobRunning || got.ResultSummary != "" {
		t.Errorf("refused finish changed the job: %+v", got)
	}
	got, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobAborted})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != core.JobAborted || got.AbortedBy != "slack:U1" {
		t.Errorf("job = %s by %q, want aborted by slack:U1", got.State, got.AbortedBy)
	}
	msgs, err := s.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 0 {
		t.Errorf("the refused finish left %d outbox messages", len(msgs))
	}
}

func testJobTrigger(t *testing.T, s core.Store) {
	task := newTask(t, s)
	j, err := s.CreateJob(t.Context(), core.Job{TaskID: task.ID, Piece: "chat", Instruction: "hi", TriggerMsgID: "1700.42"})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJob(t, s, j.ID); got.TriggerMsgID != "1700.42" {
		t.Errorf("TriggerMsgID = %q, want 1700.42", got.TriggerMsgID)
	}
}

// testStartJobNotes writes the claim's notices with the claim, and none
// when the claim is refused.
func testStartJobNotes(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)
	note := core.OutboxMessage{Kind: core.OutboxUpdate, Payload: `{"text":"working"}`}
	if _, err := s.StartJob(ctx, j.ID, 1, note); err != nil {
		t.Fatal(err)
	}
	// A stale claim writes nothing.
	if _, err := s.StartJob(ctx, j.ID, 1, note); !errors.Is(err, core.ErrStale) {
		t.Fatalf("stale claim: err = %v, want ErrStale", err)
	}
	got := outboxWhere(t, s, func(m core.OutboxMessage) bool { return m.JobID == j.ID }, byID)
	if len(got) != 1 || got[0].TaskID != j.TaskID || got[0].Attempt != 1 || got[0].Payload != note.Payload {
		t.Errorf("outbox after the claims = %+v; want the one note of attempt 1", got)
	}
}

// testSaveProgressEvents records the events given with the progress, and
// none when the save is refused.
func testSaveProgressEvents(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)
	if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	p := core.Progress{Movement: "plan", Events: []core.JobEvent{
		{Kind: "movement_finished", Movement: "intake"}, {Kind: "movement_started", Movement: "plan"},
	}}
	if err := s.SaveProgress(ctx, j.ID, 1, p); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveProgress(ctx, j.ID, 2, p); !errors.Is(err, core.ErrStale) {
		t.Fatalf("stale save: err = %v, want ErrStale", err)
	}
	want := []string{core.EventCreated, core.EventClaimed, "movement_finished", "movement_started"}
	if d := diff(want, eventKinds(t, s, j.ID)); d != "" {
		t.Errorf("events:\n%s", d)
	}
}

// testQueuedAt follows when a job last became queued: created, requeued,
// resumed; a takeover from a lost lease leaves it unknown.
func testQueuedAt(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)
	if j.QueuedAt.IsZero() || !j.QueuedAt.Equal(j.CreatedAt) {
		t.Errorf("created: QueuedAt = %v, CreatedAt = %v; want equal", j.QueuedAt, j.CreatedAt)
	}
	created := j.QueuedAt
	time.Sleep(5 * time.Millisecond)
	if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	if got := mustJob(t, s, j.ID).QueuedAt; !got.Equal(created) {
		t.Errorf("claimed: QueuedAt = %v, want %v kept", got, created)
	}
	requeued, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobQueued})
	if err != nil {
		t.Fatal(err)
	}
	if !requeued.QueuedAt.After(created) {
		t.Errorf("requeued: QueuedAt = %v, want after %v", requeued.QueuedAt, created)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := s.StartJob(ctx, j.ID, 2); err != nil {
		t.Fatal(err)
	}
	parked, err := s.FinishJob(ctx, j.ID, 2, core.Finish{To: core.JobWaitingHuman, Question: "?"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ResumeJob(ctx, j.ID, parked.WaitSeq); err != nil || !ok {
		t.Fatalf("ResumeJob = %v, %v", ok, err)
	}
	if got := mustJob(t, s, j.ID).QueuedAt; !got.After(requeued.QueuedAt) {
		t.Errorf("resumed: QueuedAt = %v, want after %v", got, requeued.QueuedAt)
	}
	if _, err := s.StartJob(ctx, j.ID, 3); err != nil {
		t.Fatal(err)
	}
	taken, err := s.StartJob(ctx, j.ID, 4) // attempt 3 lost its lease
	if err != nil {
		t.Fatal(err)
	}
	if !taken.QueuedAt.IsZero() {
		t.Errorf("taken over: QueuedAt = %v, want zero", taken.QueuedAt)
	}
}
