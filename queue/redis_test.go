package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/queue"
	"github.com/baton-bot/baton/queue/redistest"
)

// ownRedis starts a private redis-server, for tests that flush, restart or
// kill it.
func ownRedis(t *testing.T) (*redistest.Server, *redis.Client, *queue.Redis) {
	t.Helper()
	srv := redistest.Start(t)
	client := srv.Client(t)
	q, err := queue.NewRedis(client, queue.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return srv, client, q
}

func TestRedisFlushThenReconcile(t *testing.T) {
	ctx := t.Context()
	srv, _, q := ownRedis(t)
	for _, id := range []int64{1, 2} {
		if err := q.Enqueue(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	running, err := q.Claim(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}

	srv.Flush(t)

	n, err := q.Reconcile(ctx, []core.ReconcileItem{
		{JobID: 1, State: core.JobRunning, Attempt: running.Attempt},
		{JobID: 2, State: core.JobQueued},
	})
	if err != nil || n != 2 {
		t.Fatalf("Reconcile after FLUSHALL = %d, %v; want 2", n, err)
	}
	// The old attempt is fenced off: the job comes back under a newer one.
	st, err := q.Heartbeat(ctx, []core.Lease{running})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]core.LeaseStatus{core.LeaseLost}, st); diff != "" {
		t.Errorf("Heartbeat of the lost lease (-want +got):\n%s", diff)
	}
	got := map[int64]int64{}
	for range 2 {
		l, err := q.Claim(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got[l.JobID] = l.Attempt
	}
	if diff := cmp.Diff(map[int64]int64{1: running.Attempt + 1, 2: 1}, got); diff != "" {
		t.Errorf("attempts after reconcile (-want +got):\n%s", diff)
	}
}

func TestRedisRestart(t *testing.T) {
	ctx := t.Context()
	srv, _, q := ownRedis(t)
	if err := q.Enqueue(ctx, 1); err != nil {
		t.Fatal(err)
	}

	srv.Restart(t) // empty: the test server keeps nothing on disk

	// The client reconnects on its own; the queue works on.
	eventually(t, "the queue answers after a restart", func() bool { return q.Ping(ctx) == nil })
	if err := q.Enqueue(ctx, 2); err != nil {
		t.Fatalf("Enqueue after restart: %v", err)
	}
	n, err := q.Reconcile(ctx, []core.ReconcileItem{
		{JobID: 1, State: core.JobQueued},
		{JobID: 2, State: core.JobQueued},
	})
	if err != nil || n != 1 {
		t.Fatalf("Reconcile after restart = %d, %v; want 1", n, err)
	}
	var ids []int64
	for range 2 {
		l, err := q.Claim(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, l); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.JobID)
	}
	if diff := cmp.Diff([]int64{2, 1}, ids); diff != "" {
		t.Errorf("claimed after restart (-want +got):\n%s", diff)
	}
}

func TestRedisWatchAbortsConnectionKilled(t *testing.T) {
	ctx := t.Context()
	_, client, q := ownRedis(t)
	subscribed := func() bool {
		n, err := client.PubSubNumSub(ctx, "baton:{jobs}:aborts").Result()
		return err == nil && n["baton:{jobs}:aborts"] > 0
	}

	first := make(chan error, 1)
	go func() { first <- q.WatchAborts(ctx, func(int64) {}) }()
	eventually(t, "the first watch subscribes", subscribed)
	if err := client.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-first:
		if err == nil || errors.Is(err, context.Canceled) {
			t.Errorf("WatchAborts returned %v when its connection was killed, want the error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchAborts did not return when its connection was killed")
	}

	// Redis may free the killed connection a moment later: the second
	// watch's subscription must be its own, not the first's still counted.
	eventually(t, "the killed subscription to go", func() bool { return !subscribed() })

	seen := make(chan int64, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	second := make(chan error, 1)
	go func() {
		second <- q.WatchAborts(wctx, func(id int64) {
			select {
			case seen <- id:
			default:
			}
		})
	}()
	eventually(t, "the second watch subscribes", subscribed)
	if err := q.Enqueue(ctx, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Claim(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := q.Abort(ctx, 9); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-seen:
		if id != 9 {
			t.Errorf("watch saw job %d, want 9", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new watch saw no abort")
	}
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Errorf("WatchAborts returned %v, want context.Canceled", err)
	}
}

func TestRedisConcurrentClaimers(t *testing.T) {
	const (
		jobs     = 2000
		claimers = 20
	)
	ctx := t.Context()
	client, prefix := redistest.Client(t)
	q, err := queue.NewRedis(client, queue.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	for id := int64(1); id <= jobs; id++ {
		if err := q.Enqueue(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu    sync.Mutex
		acked = map[int64]int{} // guarded by mu
		wg    sync.WaitGroup
		errs  = make(chan error, claimers)
	)
	for range claimers {
		wg.Go(func() {
			for {
				l, err := q.Claim(ctx, 200*time.Millisecond)
				if errors.Is(err, core.ErrNoJob) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				if err := q.Ack(ctx, l); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acked[l.JobID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(acked) != jobs {
		t.Errorf("%d jobs acked, want %d", len(acked), jobs)
	}
	for id, n := range acked {
		if n != 1 {
			t.Errorf("job %d acked %d times", id, n)
		}
	}
	s, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(core.QueueStats{}, s); diff != "" {
		t.Errorf("Stats at the end (-want +got):\n%s", diff)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRedisClosedClient(t *testing.T) {
	client, prefix := redistest.Client(t)
	q, err := queue.NewRedis(client, queue.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(t.Context(), 1); !errors.Is(err, core.ErrClosed) {
		t.Errorf("Enqueue on a closed client: %v, want core.ErrClosed", err)
	}
}

// TestRedisBlockedClaimWakes: a Claim blocked on the doorbell returns as
// soon as its context ends, or the queue closes, without waiting for the
// end of its block (made an hour here, so only the wake-up can end it), and
// takes nothing with it: a job enqueued afterwards goes to the next Claim.
func TestRedisBlockedClaimWakes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		end     func(q *queue.Redis, cancel context.CancelFunc)
		wantErr error
	}{
		{"context ends", func(_ *queue.Redis, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"queue closes", func(q *queue.Redis, _ context.CancelFunc) { _ = q.Close() }, core.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A Redis of its own: the test counts the blocked clients.
			client := redistest.Start(t).Client(t)
			q, err := queue.NewRedis(client, queue.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = q.Close() })
			queue.SetMaxBlock(q, time.Hour)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := q.Claim(ctx, time.Hour)
				done <- err
			}()
			eventually(t, "the claim blocks on the doorbell", func() bool { return blockedClients(t, client) > 0 })
			tc.end(q, cancel)
			select {
			case err := <-done:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("blocked Claim returned %v, want %v", err, tc.wantErr)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the blocked Claim was not woken")
			}
			eventually(t, "no client left blocked", func() bool { return blockedClients(t, client) == 0 })

			// Nothing was lost: the next claimer (on a fresh queue value
			// when this one is closed) gets the next job.
			q2, err := queue.NewRedis(client, queue.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = q2.Close() })
			if err := q2.Enqueue(t.Context(), 5); err != nil {
				t.Fatal(err)
			}
			l, err := q2.Claim(t.Context(), 5*time.Second)
			if err != nil || l.JobID != 5 {
				t.Fatalf("Claim after the wake-up = job %d, %v; want job 5", l.JobID, err)
			}
		})
	}
}

// blockedClients is the number of clients Redis reports blocked.
func blockedClients(t *testing.T, client *redis.Client) int {
	t.Helper()
	info, err := client.Info(t.Context(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("blocked_clients: %q", v)
			}
			return n
		}
	}
	t.Fatalf("no blocked_clients in INFO clients:\n%s", info)
	return 0
}
