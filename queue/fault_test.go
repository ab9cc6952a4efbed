package queue_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/queue"
	"github.com/baton-bot/baton/queue/redistest"
)

// The fault tests run workers as separate processes: the test binary
// re-executed with BATON_FAULT_WORKER set runs faultWorker instead of the
// tests, so that a worker can be killed with SIGKILL or paused with SIGSTOP.

const (
	faultLease     = 1500 * time.Millisecond
	faultHeartbeat = 300 * time.Millisecond
)

// fastBackoff retries jobs whose lease expired almost at once.
func fastBackoff(int) time.Duration { return 50 * time.Millisecond }

// TestMain runs faultWorker instead of the tests in a child started by
// cluster.spawn.
func TestMain(m *testing.M) {
	if os.Getenv("BATON_FAULT_WORKER") == "1" {
		if err := faultWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "fault worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// signalContext is the fault worker's context: it ends on SIGTERM, which
// the test sends to stop a worker gracefully, or on SIGINT.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

// faultWorker runs a worker pool over the store and Redis named in the
// environment until SIGTERM. Its engine sleeps as the job's instruction
// says ("sleep 40ms"), saving progress before and after, and finishes with
// one outbox message: the job's effect, which must be committed once.
func faultWorker() error {
	ctx, stop := signalContext()
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	st, err := sqlite.Open(ctx, os.Getenv("BATON_FAULT_DB"), sqlite.Options{WorkspaceRoot: os.TempDir(), Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("BATON_FAULT_REDIS")})
	defer rdb.Close()
	q, err := queue.NewRedis(rdb, queue.Options{Prefix: os.Getenv("BATON_FAULT_PREFIX"), Lease: faultLease, Backoff: fastBackoff, Logger: log})
	if err != nil {
		return err
	}
	conc, _ := strconv.Atoi(os.Getenv("BATON_FAULT_CONCURRENCY"))
	engine := worker.EngineFunc(func(ctx context.Context, r *worker.Run) (core.Finish, error) {
		if err := r.Save(ctx, core.Progress{Movement: "work", MovementCount: 1}); err != nil {
			return core.Finish{}, err
		}
		d, err := time.ParseDuration(strings.TrimPrefix(r.Job.Instruction, "sleep "))
		if err != nil {
			return core.Finish{}, err
		}
		select {
		case <-ctx.Done():
			return core.Finish{}, context.Cause(ctx)
		case <-time.After(d):
		}
		return core.Finish{
			To:            core.JobSucceeded,
			ResultSummary: fmt.Sprintf("done by %d", os.Getpid()),
			Outbox:        []core.OutboxMessage{{TaskID: r.Job.TaskID, JobID: r.Job.ID, Kind: core.OutboxPost, Payload: "effect"}},
		}, nil
	})
	exec := worker.NewExecutor(st, q, engine, worker.ExecutorConfig{MaxFailures: 100, Backoff: func(int) time.Duration { return 50 * time.Millisecond }, Logger: log})
	pool := worker.NewPool(q, exec, worker.PoolConfig{
		Concurrency: conc, Lease: faultLease, Heartbeat: faultHeartbeat, Reap: 200 * time.Millisecond,
		AbortPoll: 200 * time.Millisecond, ClaimWait: 200 * time.Millisecond, ShutdownGrace: 2 * time.Second,
		MaxFailures: 100, OnDead: worker.DeadJobs(st, log), Logger: log,
	})
	rec := &worker.Reconciler{Store: st, Queue: q, Every: 300 * time.Millisecond, Grace: 100 * time.Millisecond, Logger: log}
	go rec.Run(ctx)
	return pool.Run(ctx)
}

// cluster is a SQLite file, a Redis server of its own and worker processes.
type cluster struct {
	t      *testing.T
	redis  *redistest.Server
	rdb    *redis.Client
	prefix string
	db     string
	store  *sqlite.Store
	q      *queue.Redis

	mu      sync.Mutex
	workers []*proc // guarded by mu
}

type proc struct {
	cmd *exec.Cmd
	out *logTail
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	srv := redistest.Start(t)
	c := &cluster{t: t, redis: srv, rdb: srv.Client(t), prefix: "fault", db: t.TempDir() + "/baton.db"}
	st, err := sqlite.Open(context.Background(), c.db, sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c.store = st
	q, err := queue.NewRedis(c.rdb, queue.Options{Prefix: c.prefix, Lease: faultLease, Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	c.q = q
	t.Cleanup(c.stopAll)
	return c
}

// spawn starts a worker process running conc jobs at once.
func (c *cluster) spawn(conc int) *proc {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BATON_FAULT_WORKER=1", "BATON_FAULT_DB="+c.db, "BATON_FAULT_REDIS="+c.redis.Addr(),
		"BATON_FAULT_PREFIX="+c.prefix, "BATON_FAULT_CONCURRENCY="+strconv.Itoa(conc))
	p := &proc{cmd: cmd, out: &logTail{}}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go p.out.consume(stderr)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.workers = append(c.workers, p)
	return p
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.workers {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.workers {
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
	c.workers = nil
}

// addJobs creates n jobs, each on its own task, and enqueues them.
func (c *cluster) addJobs(n int, sleep func(i int) time.Duration) []int64 {
	c.t.Helper()
	ctx := context.Background()
	ids := make([]int64, 0, n)
	for i := range n {
		task, _, err := c.store.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformConsole, Channel: "fault", Thread: fmt.Sprintf("%s-%d", c.t.Name(), i)}})
		if err != nil {
			c.t.Fatal(err)
		}
		j, err := c.store.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "fault", Instruction: "sleep " + sleep(i).String()})
		if err != nil {
			c.t.Fatal(err)
		}
		if err := c.q.Enqueue(ctx, j.ID); err != nil {
			c.t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

// waitTerminal waits until every job is terminal.
func (c *cluster) waitTerminal(ids []int64, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := 0
		for _, id := range ids {
			j, err := c.store.Job(context.Background(), id)
			if err != nil {
				c.t.Fatal(err)
			}
			if !j.State.Terminal() {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d of %d jobs still not terminal after %s\n%s", left, len(ids), within, c.diagnose(ids))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// check is the invariant checker: every job succeeded, its effect and its
// finish were committed exactly once, and the queue holds nothing.
func (c *cluster) check(ids []int64) {
	c.t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		j, err := c.store.Job(ctx, id)
		if err != nil {
			c.t.Fatal(err)
		}
		if j.State != core.JobSucceeded {
			c.t.Errorf("job %d: state %s (error %q), want succeeded", id, j.State, j.Error)
		}
		evs, err := c.store.Events(ctx, id)
		if err != nil {
			c.t.Fatal(err)
		}
		finished := 0
		for _, e := range evs {
			if e.Kind == core.EventFinished {
				finished++
			}
		}
		if finished != 1 {
			c.t.Errorf("job %d: %d finish events, want 1", id, finished)
		}
	}
	effects := c.effects()
	for _, id := range ids {
		if effects[id] != 1 {
			c.t.Errorf("job %d: effect committed %d times, want 1", id, effects[id])
		}
	}
	st, err := c.q.Stats(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	if st.Pending != 0 || st.Active != 0 || st.Retry != 0 || st.Dead != 0 || st.Parked != 0 {
		c.t.Errorf("queue not empty at the end: %+v", st)
	}
}

// effects counts outbox messages per job.
func (c *cluster) effects() map[int64]int {
	c.t.Helper()
	n := map[int64]int{}
	for {
		msgs, err := c.store.DueOutbox(context.Background(), core.PlatformConsole, time.Now().Add(time.Hour), 1000)
		if err != nil {
			c.t.Fatal(err)
		}
		if len(msgs) == 0 {
			return n
		}
		for _, m := range msgs {
			n[m.JobID]++
			if err := c.store.OutboxSent(context.Background(), m.ID, "x"); err != nil {
				c.t.Fatal(err)
			}
		}
	}
}

// logTail keeps a worker's stderr for assertions and failure reports.
type logTail struct {
	mu   sync.Mutex
	text strings.Builder // guarded by mu
}

func (l *logTail) consume(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		l.mu.Lock()
		l.text.WriteString(sc.Text())
		l.text.WriteByte('\n')
		l.mu.Unlock()
	}
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

func TestFaultKilledWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: skipped with -short")
	}
	c := newCluster(t)
	ids := c.addJobs(300, func(i int) time.Duration { return time.Duration(20+i%60) * time.Millisecond })
	for range 3 {
		c.spawn(4)
	}
	// Kill a worker mid-job three times, each time starting another.
	for round := range 3 {
		time.Sleep(700 * time.Millisecond)
		c.notAllTerminal(ids)
		c.mu.Lock()
		victim := c.workers[round]
		c.mu.Unlock()
		if err := victim.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		c.spawn(4)
	}
	c.waitTerminal(ids, 90*time.Second)
	c.check(ids)
	if n := c.takeovers(ids); n == 0 {
		t.Error("no job was taken over from a killed worker: the kills hit no running job")
	}
}

func TestFaultPausedWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: skipped with -short")
	}
	c := newCluster(t)
	ids := c.addJobs(1, func(int) time.Duration { return 2 * time.Second })
	paused := c.spawn(1)
	c.waitState(ids[0], core.JobRunning, 20*time.Second)
	// Stop it inside the job's run, not inside the write transactions that
	// follow the claim: a process stopped while it holds SQLite's write
	// lock stalls every writer of the file, which no lease can cure (the
	// reason Baton keeps its transactions short).
	time.Sleep(500 * time.Millisecond)
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Past the lease: the job is reaped and taken over by another worker.
	c.spawn(1)
	c.waitTerminal(ids, 60*time.Second)
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The paused worker wakes up with a stale attempt: whether it learns of
	// it from its heartbeat or from a refused write, it commits nothing.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(paused.out.String(), "lease") && !strings.Contains(paused.out.String(), "newer attempt") {
		if time.Now().After(deadline) {
			t.Fatalf("paused worker never noticed it lost the job; its log:\n%s", paused.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	j, err := c.store.Job(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if j.Attempt < 2 || j.Failures < 1 {
		t.Errorf("job attempt %d failures %d: want a takeover (attempt ≥ 2, a failure counted)", j.Attempt, j.Failures)
	}
	c.check(ids)
}

// TestFaultRedisLost flushes, then restarts, Redis mid-run: the reconciler
// rebuilds the queue from the store and every job still runs once.
func TestFaultRedisLost(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: skipped with -short")
	}
	for _, fault := range []struct {
		name   string
		inject func(c *cluster)
	}{
		{"flushed", func(c *cluster) { c.redis.Flush(c.t) }},
		{"restarted", func(c *cluster) { c.redis.Restart(c.t) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			c := newCluster(t)
			ids := c.addJobs(200, func(i int) time.Duration { return time.Duration(20+i%60) * time.Millisecond })
			c.spawn(4)
			c.spawn(4)
			time.Sleep(600 * time.Millisecond)
			c.notAllTerminal(ids)
			fault.inject(c)
			c.waitTerminal(ids, 90*time.Second)
			c.check(ids)
			if !c.logsContain("reconciler dispatched lost jobs again") {
				t.Error("the reconciler restored nothing: the fault hit no queued or running job")
			}
		})
	}
}

// notAllTerminal fails when every job already ended: a fault injected now
// would prove nothing.
func (c *cluster) notAllTerminal(ids []int64) {
	c.t.Helper()
	for _, id := range ids {
		j, err := c.store.Job(context.Background(), id)
		if err != nil {
			c.t.Fatal(err)
		}
		if !j.State.Terminal() {
			return
		}
	}
	c.t.Fatal("every job ended before the fault: the test proves nothing; make the jobs longer")
}

// logsContain reports whether any worker's log holds s.
func (c *cluster) logsContain(s string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.workers {
		if strings.Contains(p.out.String(), s) {
			return true
		}
	}
	return false
}

// diagnose describes the jobs not yet terminal, the queue and the tail of
// every worker's log, for a failure message.
func (c *cluster) diagnose(ids []int64) string {
	var b strings.Builder
	shown := 0
	for _, id := range ids {
		j, err := c.store.Job(context.Background(), id)
		if err != nil || j.State.Terminal() || shown >= 5 {
			continue
		}
		shown++
		fmt.Fprintf(&b, "job %d: %s, attempt %d, failures %d, error %q\n", j.ID, j.State, j.Attempt, j.Failures, j.Error)
	}
	if st, err := c.q.Stats(context.Background()); err == nil {
		fmt.Fprintf(&b, "queue: %+v\n", st)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.workers {
		out := p.out.String()
		out = out[max(0, len(out)-4000):]
		fmt.Fprintf(&b, "--- worker %d log (tail):\n%s\n", i, out)
	}
	return b.String()
}

// takeovers counts the failures the store recorded (lease takeovers).
func (c *cluster) takeovers(ids []int64) int {
	c.t.Helper()
	n := 0
	for _, id := range ids {
		j, err := c.store.Job(context.Background(), id)
		if err != nil {
			c.t.Fatal(err)
		}
		n += j.Failures
	}
	return n
}

// waitState waits until job id is in state s.
func (c *cluster) waitState(id int64, s core.JobState, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := c.store.Job(context.Background(), id)
		if err != nil {
			c.t.Fatal(err)
		}
		if j.State == s {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("job %d: state %s after %s, want %s", id, j.State, within, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
