package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// rateResult is what one job-rate run (one gateway, Processes workers)
// measured.
type rateResult struct {
	Processes     int
	Store         string // the store, in words
	Sent, Refused int
	Succeeded     int // jobs that succeeded
	Unfinished    int // events whose job did not succeed: failed, never ended or never made
	ClaimedTwice  int // jobs claimed more than once (redelivered)
	ToolCalls     int // tool calls the succeeded jobs made, from their events
	// Drain is from the first job's start to the last one's finish, as
	// the store recorded them.
	Drain time.Duration
	// JobsPerSecond is the rate of the middle 80 % of the finishes: the
	// first and last tenth are the workers' start and the backlog's tail.
	// Window is the time they took.
	JobsPerSecond float64
	Window        time.Duration
	CPU           time.Duration // user + system time of the gateway and the workers
	Dir           string        // the run's directory, when kept
}

// ok reports whether every event sent became one job that succeeded.
func (r rateResult) ok() bool {
	return r.Sent > 0 && r.Refused == 0 && r.Unfinished == 0 && r.Succeeded == r.Sent
}

// rateReport is the job-rate results as the command prints them.
func rateReport(res []rateResult, o options) string {
	var b strings.Builder
	store := "SQLite, a file per run"
	if o.databaseURL != "" {
		store = "PostgreSQL, a schema per run"
	}
	fmt.Fprintf(&b, "store        %s; Redis queue; workers.concurrency %d per worker process\n", store, o.workers)
	fmt.Fprintf(&b, "a job        3 model answers, each after %s: Write %s, Read it, transition COMPLETE\n", o.think, notesPath)
	fmt.Fprintf(&b, "events       %d/s for %s, each a new thread, sent before the workers start\n", o.rate, o.duration)
	fmt.Fprintf(&b, "jobs/s       over the middle 80 %% of the finishes; drain: first start to last finish\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workers\tsent\tsucceeded\tnot succeeded\trefused\tclaimed twice\ttool calls/job\tdrain\tjobs/s\tCPU ms/job")
	for _, r := range res {
		var calls, cpu float64
		if r.Succeeded > 0 {
			calls = float64(r.ToolCalls) / float64(r.Succeeded)
			cpu = float64(r.CPU.Milliseconds()) / float64(r.Succeeded)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f s\t%.1f\t%.1f\n", r.Processes, r.Sent, r.Succeeded, r.Unfinished,
			r.Refused, r.ClaimedTwice, calls, r.Drain.Seconds(), r.JobsPerSecond, cpu)
	}
	tw.Flush()
	for _, r := range res {
		if r.Dir != "" {
			fmt.Fprintf(&b, "work directory (%d workers)  %s  (%s)\n", r.Processes, r.Dir, r.Store)
		}
	}
	return b.String()
}

// notesPath is the file each job writes and reads in its task's workspace.
const notesPath = "notes/load.md"

// jobScript is the model of the job-rate mode: it answers each request
// after think, by how many tool results the job has seen: a Write of a
// small file, a Read of it, then the transition that completes the job.
func jobScript(think time.Duration) llmtest.Handler {
	write, _ := json.Marshal(map[string]string{"path": notesPath,
		"content": strings.Repeat("A line of the notes this job keeps while it works.\n", 40)})
	read, _ := json.Marshal(map[string]string{"path": notesPath})
	return func(req llmtest.Request) llmtest.Step {
		var results int
		for _, m := range req.Messages {
			if m.Role == "tool" {
				results++
			}
		}
		var step llmtest.Step
		switch results {
		case 0:
			step = llmtest.Call("Write", string(write))
		case 1:
			step = llmtest.Call("Read", string(read))
		default:
			step = llmtest.Transition("COMPLETE", "Wrote and read "+notesPath+".")
		}
		return step.After(think)
	}
}

var (
	gatewayStarted = regexp.MustCompile(`baton gateway started" http=(\S+)`)
	workerStarted  = regexp.MustCompile(`worker started`)
)

// runRates measures, for each count in o.processes, the jobs a second one
// gateway and that many worker processes finish.
func runRates(ctx context.Context, o options) ([]rateResult, error) {
	dir, cleanup, err := o.workDir("baton-rate-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	bin, err := o.batonBinary(ctx, dir)
	if err != nil {
		return nil, err
	}
	redisURL := o.redisURL
	if redisURL == "" {
		var stop func()
		if redisURL, stop, err = startRedis(ctx, filepath.Join(dir, "redis")); err != nil {
			return nil, err
		}
		defer stop()
	}
	llm := llmtest.Start(complaints{}, llmtest.WithoutRequestLog())
	defer llm.Close()
	llm.Handle(jobScript(o.think))
	slack := fakeSlack()
	defer slack.Close()

	var res []rateResult
	for _, n := range o.processes {
		r, err := runRate(ctx, o, rateRun{dir: filepath.Join(dir, fmt.Sprintf("workers-%d", n)), bin: bin,
			redisURL: redisURL, llmURL: llm.URL(), slackURL: slack.URL, processes: n})
		if err != nil {
			return nil, fmt.Errorf("%d worker processes: %w", n, err)
		}
		if o.keep {
			r.Dir = filepath.Join(dir, fmt.Sprintf("workers-%d", n))
		}
		res = append(res, r)
	}
	return res, nil
}

// rateRun is what one job-rate run is given.
type rateRun struct {
	dir                        string // the run's own directory
	bin                        string
	redisURL, llmURL, slackURL string
	processes                  int
}

// runRate runs one gateway and rr.processes workers on a store of their
// own, sends the events and reads from the store how fast the jobs ran.
func runRate(ctx context.Context, o options, rr rateRun) (res rateResult, err error) {
	res.Processes = rr.processes
	if err := os.MkdirAll(rr.dir, 0o755); err != nil {
		return res, err
	}
	db, drop, err := o.store(ctx, rr.dir)
	if err != nil {
		return res, err
	}
	defer drop()
	res.Store = db.String()
	secret := randomHex()
	conf, err := config(rr.dir, rr.slackURL, o.workers, filepath.Join(rr.dir, "workspaces"))
	if err != nil {
		return res, err
	}

	// Each process has a data_dir of its own: they share the store, the
	// queue and the workspace root only.
	o.say("%d worker process(es) on %s: starting baton gateway (logs in %s)…", rr.processes, res.Store, rr.dir)
	start := func(name, sub string) (*process, error) {
		env := environ(rr.dir, filepath.Join(rr.dir, strings.ReplaceAll(name, " ", "-")), db, rr.redisURL, rr.llmURL, secret)
		return startBaton(name, rr.bin, rr.dir, filepath.Join(rr.dir, strings.ReplaceAll(name, " ", "-")+".log"), env, sub, "--config", conf)
	}
	var procs []*process
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	// The gateway first: it migrates the new store before the workers
	// open it.
	gw, err := start("gateway", "gateway")
	if err != nil {
		return res, err
	}
	procs = append(procs, gw)
	addr, err := gw.logged(ctx, gatewayStarted)
	if err != nil {
		return res, err
	}
	// The backlog first, then the workers: the rate measured is theirs,
	// not the gateway's intake of events.
	base := "http://" + addr
	sent, refused, store, err := sendAndOpen(ctx, o, db, base, secret)
	if err != nil {
		return res, err
	}
	defer store.Close()
	res.Sent, res.Refused = len(sent), refused
	want := int64(len(sent) - refused)
	if err := await(ctx, store, o.settle, func(total, _ int64) (int64, bool) { return total, total >= want }); err != nil {
		return res, fmt.Errorf("the gateway's jobs: %w", err)
	}

	o.say("starting %d worker process(es)…", rr.processes)
	for i := range rr.processes {
		w, err := start(fmt.Sprintf("worker %d", i+1), "worker")
		if err != nil {
			return res, err
		}
		procs = append(procs, w)
	}
	for _, w := range procs[1:] {
		if _, err := w.logged(ctx, workerStarted); err != nil {
			return res, err
		}
	}
	o.say("waiting for the jobs to finish…")
	err = await(ctx, store, o.settle, func(total, ended int64) (int64, bool) { return ended, total >= want && ended == total })
	if err != nil && !errors.Is(err, errStalled) {
		return res, err
	}
	for _, p := range procs {
		cpu, _ := p.figures()
		res.CPU += cpu
	}
	if err := rates(ctx, store, sent, &res); err != nil {
		return res, err
	}
	return res, nil
}

// errStalled is await's error when nothing moved for its wait.
var errStalled = errors.New("no progress")

// await polls the store's job counts until done says so, given how many
// jobs there are and how many have ended; done also returns a count that
// grows as the jobs progress. await fails with errStalled when that count
// has not grown for wait.
func await(ctx context.Context, store jobReader, wait time.Duration, done func(total, ended int64) (progress int64, ok bool)) error {
	last := int64(-1)
	deadline := time.Now().Add(wait)
	for {
		n, err := store.CountJobs(ctx)
		if err != nil {
			return err
		}
		var total, ended int64
		for state, c := range n {
			total += c
			if state.Terminal() {
				ended += c
			}
		}
		progress, ok := done(total, ended)
		if ok {
			return nil
		}
		if progress > last {
			last, deadline = progress, time.Now().Add(wait)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w for %s: %d jobs, %d ended", errStalled, wait, total, ended)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rates reads the jobs of the events sent into r: how many succeeded,
// how many were claimed more than once, the tool calls they made, and
// the rate of their finishes.
func rates(ctx context.Context, store jobReader, sent map[string]time.Time, r *rateResult) error {
	jobs, err := store.Jobs(ctx, core.JobFilter{})
	if err != nil {
		return err
	}
	if len(jobs) > len(sent) {
		return fmt.Errorf("%d jobs for %d events: an event started more than one job", len(jobs), len(sent))
	}
	var first time.Time
	var finishes []time.Time
	for _, j := range jobs {
		if _, ok := sent[j.TriggerMsgID]; !ok || j.State != core.JobSucceeded {
			continue
		}
		r.Succeeded++
		if first.IsZero() || j.StartedAt.Before(first) {
			first = j.StartedAt
		}
		finishes = append(finishes, j.FinishedAt)
		evs, err := store.Events(ctx, j.ID)
		if err != nil {
			return err
		}
		claims := 0
		for _, e := range evs {
			switch e.Kind {
			case core.EventClaimed:
				claims++
			case string(engine.StepTool):
				r.ToolCalls++
			}
		}
		if claims > 1 {
			r.ClaimedTwice++
		}
	}
	r.Unfinished = r.Sent - r.Refused - r.Succeeded
	if len(finishes) < 2 {
		return nil
	}
	slices.SortFunc(finishes, time.Time.Compare)
	r.Drain = finishes[len(finishes)-1].Sub(first)
	lo, hi := len(finishes)/10, len(finishes)-1-len(finishes)/10
	if r.Window = finishes[hi].Sub(finishes[lo]); r.Window > 0 {
		r.JobsPerSecond = float64(hi-lo) / r.Window.Seconds()
	}
	return nil
}

// startRedis runs a redis-server of the run's own on a free port of
// 127.0.0.1, its files in dir and nothing persisted, and returns its URL
// and how to stop it.
func startRedis(ctx context.Context, dir string) (url string, stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, errors.New("redis-server is not on PATH: install it, or name a Redis with -redis or REDIS_URL")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", "redis.log")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start redis-server: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return "redis://" + addr + "/0", stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return "", nil, fmt.Errorf("redis-server on %s did not answer: %w\n%s", addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
