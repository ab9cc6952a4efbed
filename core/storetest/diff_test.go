package storetest

import (
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

func TestDiff(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		want, got any
		out       string
	}{
		{"equal", core.Task{ID: 1, Title: "a", CreatedAt: at}, core.Task{ID: 1, Title: "a", CreatedAt: at}, ""},
		{"a time in another location is the same time", at, at.In(time.FixedZone("X", 3600)), ""},
		{"fields", core.Task{ID: 1, Title: "a", Thread: core.ThreadRef{Channel: "C"}}, core.Task{ID: 2, Title: "", Thread: core.ThreadRef{Channel: "D"}},
			".ID: want 1, got 2\n.Thread.Channel: want \"C\", got \"D\"\n.Title: want \"a\", got \"\""},
		{"times", at, at.Add(time.Second), "value: want 2025-01-02 03:04:05 +0000 UTC, got 2025-01-02 03:04:06 +0000 UTC"},
		{"slice elements", []int64{1, 2, 3}, []int64{1, 5}, "[1]: want 2, got 5\n[2]: missing 3"},
		{"extra element", []string{"a"}, []string{"a", "b"}, "[1]: unexpected \"b\""},
		{"nil and empty differ", []string(nil), []string{}, "value: want nil, got []"},
		{"maps", map[core.JobState]int64{core.JobQueued: 1, core.JobFailed: 0}, map[core.JobState]int64{core.JobQueued: 2, core.JobRunning: 1},
			"[failed]: missing 0\n[queued]: want 1, got 2\n[running]: unexpected 1"},
		{"types", int64(1), 1, "value: want 1 (int64), got 1 (int)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := diff(tc.want, tc.got); got != tc.out {
				t.Errorf("diff =\n%s\nwant\n%s", got, tc.out)
			}
		})
	}
}
