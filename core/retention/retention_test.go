package retention

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/google/go-cmp/cmp"
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
// ends the round — what was pruned stays pruned and counted — with a
// warning naming the error; Run goes on rather than fail, the store still
// takes writes between rounds, a round that meets the full disk again
// stops at once, and the first round after space came back prunes the
// rest.
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
	var logs bytes.Buffer // written by Run's goroutine only, read after it returns
	var counted []int64   // rows counted, per round
	l, err := New(p, Config{Retention: core.Retention{Comments: 365 * 24 * time.Hour}, Batch: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Pruned: func(n core.Pruned) { counted[len(counted)-1] += n.Total() }})
	if err != nil {
		t.Fatal(err)
	}
	counted = append(counted, 0)
	var left []int // comments left after each round
	var writes []error
	runCtx, stop := context.WithCancel(ctx)
	l.sleep = func(ctx context.Context, d time.Duration) error {
		if d < l.cfg.Every {
			return nil // a pause between batches
		}
		// The wait for the next round: the service writes meanwhile.
		c, err := s.RecentComments(ctx, task.ID, 10)
		if err != nil {
			t.Error(err)
		}
		left = append(left, len(c))
		_, err = s.AddComment(ctx, core.Comment{TaskID: task.ID, Role: core.RoleUser, Text: "new"})
		writes = append(writes, err)
		switch len(left) {
		case 1: // the disk is still full for the second round
			p.calls, p.n = 0, 1
		case 2: // space again
			p.n = 0
		case 3:
			stop()
			return context.Canceled
		}
		counted = append(counted, 0)
		return nil
	}
	if err := l.Run(runCtx); err != nil {
		t.Fatalf("Run = %v, want nil: a failed round is not the service's failure", err)
	}
	if d := cmp.Diff([]int64{2, 0, 3}, counted); d != "" {
		t.Errorf("rows pruned and counted per round (-want +got):\n%s", d)
	}
	// Each round's count of comments left includes the new ones written
	// between rounds, which are young.
	if d := cmp.Diff([]int{3, 4, 2}, left); d != "" {
		t.Errorf("comments left after each round (-want +got):\n%s", d)
	}
	for i, err := range writes {
		if err != nil {
			t.Errorf("a write after round %d: %v", i+1, err)
		}
	}
	warn := regexp.MustCompile(`level=WARN msg="retention: pruning stopped for this round; the service goes on" error="retention: prune comments: database or disk is full \(13\)"`)
	if got := len(warn.FindAllString(logs.String(), -1)); got != 2 {
		t.Errorf("%d warnings of a full disk, want one per failed round (2):\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), `msg="retention: pruned" jobs=0 events=0 comments=3`) {
		t.Errorf("the log lacks the round that pruned the rest:\n%s", logs.String())
	}
}
