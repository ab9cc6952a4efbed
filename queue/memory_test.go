package queue_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/queue"
)

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time // guarded by mu
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestMemoryLeasesFollowTheClock(t *testing.T) {
	ctx := t.Context()
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	q := newMemory(t, queue.Options{
		Lease:   30 * time.Second,
		Backoff: func(failures int) time.Duration { return time.Duration(failures) * time.Minute },
		Now:     clk.Now,
	})
	if err := q.Enqueue(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l, err := q.Claim(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.Now().Add(30 * time.Second); !l.Deadline.Equal(want) {
		t.Errorf("Deadline = %v, want %v", l.Deadline, want)
	}

	steps := []struct {
		name      string
		advance   time.Duration
		heartbeat bool
		want      core.QueueStats
	}{
		{name: "before the deadline", advance: 29 * time.Second, want: core.QueueStats{Active: 1}},
		{name: "a heartbeat extends the lease", advance: 20 * time.Second, heartbeat: true, want: core.QueueStats{Active: 1}},
		{name: "past the extended deadline", advance: 31 * time.Second, want: core.QueueStats{Retry: 1}},
	}
	for _, s := range steps {
		if s.heartbeat {
			st, err := q.Heartbeat(ctx, []core.Lease{l})
			if err != nil || st[0] != core.LeaseOK {
				t.Fatalf("%s: Heartbeat = %v, %v", s.name, st, err)
			}
		}
		clk.Add(s.advance)
		if _, err := q.Reap(ctx, 5); err != nil {
			t.Fatal(err)
		}
		got, _ := q.Stats(ctx)
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: Stats (-want +got):\n%s", s.name, diff)
		}
	}

	// Backoff(1) is a minute: not claimable before, claimable after.
	if _, err := q.Claim(ctx, 0); err != core.ErrNoJob {
		t.Fatalf("Claim before the backoff: %v, want ErrNoJob", err)
	}
	clk.Add(time.Minute)
	l, err = q.Claim(ctx, 0)
	if err != nil {
		t.Fatalf("Claim after the backoff: %v", err)
	}
	if l.Attempt != 2 || l.Failures != 1 {
		t.Errorf("attempt %d failures %d, want 2 and 1", l.Attempt, l.Failures)
	}
}

func TestMemoryForgetsFinishedJobs(t *testing.T) {
	ctx := t.Context()
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	q := newMemory(t, queue.Options{Now: clk.Now})
	if err := q.Enqueue(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l, err := q.Claim(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(ctx, l); err != nil {
		t.Fatal(err)
	}
	clk.Add(7*24*time.Hour + time.Second)
	if _, err := q.Reap(ctx, 5); err != nil {
		t.Fatal(err)
	}
	// Forgotten: the id is new to the queue again.
	if err := q.Enqueue(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l, err = q.Claim(ctx, 0)
	if err != nil {
		t.Fatalf("Claim of a forgotten job enqueued again: %v", err)
	}
	if l.Attempt != 1 {
		t.Errorf("Attempt = %d, want 1", l.Attempt)
	}
}

// TestMemoryBoundsFinishedJobs: past 10,000 finished jobs the oldest are
// forgotten well before their week is out, so that a busy process does
// not hold every job of the week; the latest stay known.
func TestMemoryBoundsFinishedJobs(t *testing.T) {
	ctx := t.Context()
	q := newMemory(t, queue.Options{})
	const jobs = 10_500
	for id := int64(1); id <= jobs; id++ {
		if err := q.Enqueue(ctx, id); err != nil {
			t.Fatal(err)
		}
		l, err := q.Claim(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Reap(ctx, 5); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id        int64
		forgotten bool
	}{{1, true}, {500, true}, {501, false}, {jobs, false}} {
		if err := q.Enqueue(ctx, tc.id); err != nil {
			t.Fatal(err)
		}
		l, err := q.Claim(ctx, 0)
		switch {
		case tc.forgotten && err != nil:
			t.Errorf("job %d, the oldest beyond 10,000 finished, enqueued again: Claim: %v, want it new to the queue", tc.id, err)
		case tc.forgotten && l.JobID != tc.id:
			t.Errorf("claimed job %d, want %d", l.JobID, tc.id)
		case !tc.forgotten && err == nil:
			t.Errorf("job %d, among the last 10,000 finished, enqueued again was claimed (%+v), want it still known as done", tc.id, l)
		}
		if err == nil {
			if err := q.Ack(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}
}
