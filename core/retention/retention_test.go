package retention

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/sqlite"
)

// errDiskFull is SQLite's error when the disk fills.
var errDiskFull = errors.New("database or disk is full (13)")

// fullAfter passes Prune to a real store until the disk "fills": from
// call n on it fails as SQLite does then.
type fullAfter struct {
	core.Pruner
	n, calls int
}

func (f *fullAfter) Prune(ctx context.Context, r core.Retention, batch int) (core.Pruned, error) {
	f.calls++
	if f.n > 0 && f.calls >= f.n {
		return core.Pruned{}, fmt.Errorf("prune comments: %w", errDiskFull)
	}
	return f.Pruner.Prune(ctx, r, batch)
}

// TestDiskFullStopsPruningNotTheService: a disk that fills during pruning
// ends the round — what was pruned stays pruned and counted — the loop
// waits for its next round rather than failing, the store still takes
// writes, and a later round prunes the rest.
func TestDiskFullStopsPruningNotTheService(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "baton.db"), sqlite.Options{WorkspaceRoot: filepath.Join(dir, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	task, _, err := s.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Team: "T", Channel: "C", Thread: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-400 * 24 * time.Hour)
	for range 5 {
		if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, Role: core.RoleUser, Text: "old", CreatedAt: old}); err != nil {
			t.Fatal(err)
		}
	}
	p := &fullAfter{Pruner: s, n: 3}
	var counted int64
	l, err := New(p, Config{Retention: core.Retention{Comments: 365 * 24 * time.Hour}, Batch: 1,
		Pruned: func(n core.Pruned) { counted += n.Total() }})
	if err != nil {
		t.Fatal(err)
	}
	rounds := 0
	runCtx, stop := context.WithCancel(ctx)
	l.sleep = func(ctx context.Context, d time.Duration) error {
		if d >= l.cfg.Every { // the wait for the next round: the first round is over
			rounds++
			stop()
			return context.Canceled
		}
		return nil
	}
	if err := l.Run(runCtx); err != nil {
		t.Fatalf("Run = %v, want nil: a failed round is not the service's failure", err)
	}
	if rounds != 1 || counted != 2 {
		t.Fatalf("rounds %d, pruned and counted %d; want one round that pruned 2 before the disk filled", rounds, counted)
	}
	left, err := s.RecentComments(ctx, task.ID, 10)
	if err != nil || len(left) != 3 {
		t.Fatalf("comments left = %d (%v), want 3", len(left), err)
	}
	if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, Role: core.RoleUser, Text: "new"}); err != nil {
		t.Fatalf("the store after the failed round: %v", err)
	}
	p.n = 0 // space again
	got, err := l.Round(ctx)
	if err != nil || got.Comments != 3 {
		t.Fatalf("next round pruned %+v (%v), want the 3 old comments", got, err)
	}
}
