package storetest

import (
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// testUsage stores usage rows and reads them back, filtered and summed;
// rows of a task that no longer has its job still count.
func testUsage(t *testing.T, s core.Store) {
	ctx := t.Context()
	at := time.Date(2026, 3, 4, 23, 30, 0, 0, time.UTC)
	rows := []core.Usage{
		{JobID: 1, TaskID: 10, Channel: "slack:C1", Requester: "slack:U1", Model: "m1", PromptTokens: 1000, CachedTokens: 200, CompletionTokens: 50, Cost: 0.25, At: at},
		{JobID: 1, TaskID: 10, Channel: "slack:C1", Requester: "slack:U1", Model: "m2", PromptTokens: 2000, CompletionTokens: 100, Cost: 0.5, At: at.Add(time.Hour)},
		{JobID: 2, TaskID: 11, Channel: "discord:D1", Requester: "discord:U2", Model: "m1", PromptTokens: 10, CompletionTokens: 1, At: at.Add(2 * time.Hour), Day: "2026-03-05"},
	}
	for _, u := range rows {
		if err := s.AddUsage(ctx, u); err != nil {
			t.Fatalf("AddUsage: %v", err)
		}
	}
	all, err := s.Usage(ctx, core.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("Usage = %d rows, want 3", len(all))
	}
	first := all[0]
	want := rows[0]
	want.ID, want.Day = first.ID, "2026-03-04"
	if d := diff(want, first); d != "" {
		t.Errorf("first row (-want +got):\n%s", d)
	}
	if all[1].Day != "2026-03-05" || all[0].ID >= all[1].ID {
		t.Errorf("second row: day %q, ids %d, %d; want the UTC day 2026-03-05, oldest first", all[1].Day, all[0].ID, all[1].ID)
	}
	for _, tc := range []struct {
		name string
		f    core.UsageFilter
		want core.UsageSum
	}{
		{"all", core.UsageFilter{}, core.UsageSum{Requests: 3, PromptTokens: 3010, CachedTokens: 200, CompletionTokens: 151, Cost: 0.75}},
		{"job", core.UsageFilter{JobID: 1}, core.UsageSum{Requests: 2, PromptTokens: 3000, CachedTokens: 200, CompletionTokens: 150, Cost: 0.75}},
		{"task", core.UsageFilter{TaskID: 11}, core.UsageSum{Requests: 1, PromptTokens: 10, CompletionTokens: 1}},
		{"channel and day", core.UsageFilter{Channel: "slack:C1", FromDay: "2026-03-05", ToDay: "2026-03-05"}, core.UsageSum{Requests: 1, PromptTokens: 2000, CompletionTokens: 100, Cost: 0.5}},
		{"requester", core.UsageFilter{Requester: "discord:U2"}, core.UsageSum{Requests: 1, PromptTokens: 10, CompletionTokens: 1}},
		{"none", core.UsageFilter{Channel: "slack:C9"}, core.UsageSum{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SumUsage(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if d := diff(tc.want, got); d != "" {
				t.Errorf("SumUsage(%+v) (-want +got):\n%s", tc.f, d)
			}
			rows, err := s.Usage(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var sum core.UsageSum
			for _, u := range rows {
				sum.Add(u)
			}
			if d := diff(tc.want, sum); d != "" {
				t.Errorf("sum of Usage(%+v) (-want +got):\n%s", tc.f, d)
			}
		})
	}
}

// testWaitKind keeps what a job waits for and the checkpoint of an
// engine's question in waiting_human, taken once by the resumed attempt.
func testWaitKind(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)
	if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	parked, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobWaitingHuman, Question: "over budget", ResumeMovement: "work",
		WaitKind: core.WaitBudget, Checkpoint: `{"at":"here"}`})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJob(t, s, j.ID); got.WaitKind != core.WaitBudget || parked.WaitKind != core.WaitBudget {
		t.Errorf("wait kind = %q (returned %q), want %q", got.WaitKind, parked.WaitKind, core.WaitBudget)
	}
	if ok, err := s.ResumeJob(ctx, j.ID, parked.WaitSeq); !ok || err != nil {
		t.Fatalf("ResumeJob = %v, %v", ok, err)
	}
	if _, err := s.StartJob(ctx, j.ID, 2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TakeCheckpoint(ctx, j.ID, 2); err != nil || got != `{"at":"here"}` {
		t.Errorf("TakeCheckpoint = %q, %v; want the park's", got, err)
	}
	asked, err := s.FinishJob(ctx, j.ID, 2, core.Finish{To: core.JobWaitingHuman, Question: "which year?", ResumeMovement: "work"})
	if err != nil {
		t.Fatal(err)
	}
	if asked.WaitKind != "" {
		t.Errorf("wait kind of an ASK = %q, want none", asked.WaitKind)
	}
}
