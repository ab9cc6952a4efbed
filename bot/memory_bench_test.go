package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
)

// rssMB returns the process's resident set size in MiB, after a GC.
func rssMB(tb testing.TB) float64 {
	tb.Helper()
	runtime.GC()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	tb.Skip("no VmRSS in /proc/self/status")
	return 0
}

// BenchmarkMemory measures the resident memory of a Baton process (the
// system `baton serve` builds, on the embedded defaults) holding 100,000
// tasks whose jobs wait for an answer (and what each of them adds), and
// the memory each running job adds while its model call is out (tool
// processes excluded).
//
//	go test ./bot/ -run '^$' -bench Memory -benchtime 1x
func BenchmarkMemory(b *testing.B) {
	gate := make(chan struct{})
	var inFlight sync.WaitGroup
	llmSrv := llmtest.NewServer(b)
	llmSrv.Handle(func(req llmtest.Request) llmtest.Step {
		if strings.Contains(req.Messages[1].Text(), "## Request\nrun") {
			inFlight.Done()
			<-gate // a running job: its model call stays out
		}
		return llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"ok"}`)
	})
	cfg := DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.LLM.BaseURL = llmSrv.URL()
	cfg.Tools.Bash.Sandbox = "none"
	cfg.Workers.Concurrency = 20
	cfg.Log.Level = "error"
	logger, err := newLogger(cfg.Log, os.Stderr)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sys, err := newSystem(ctx, cfg, logger, systemOptions{converse: true})
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Close()
	base := rssMB(b)

	// The waiting jobs are made by several goroutines at once, so that
	// the store commits their writes together (one after another, the
	// setup took over three minutes). Each maker takes whichever job the
	// queue hands it.
	const waiting, makers = 100_000, 8
	var (
		next   atomic.Int64
		failed = make(chan error, makers)
		makes  sync.WaitGroup
	)
	for range makers {
		makes.Go(func() {
			for i := next.Add(1) - 1; i < waiting; i = next.Add(1) - 1 {
				if err := makeWaiting(ctx, sys, i); err != nil {
					failed <- err
					return
				}
			}
		})
	}
	makes.Wait()
	close(failed)
	if err := <-failed; err != nil {
		b.Fatal(err)
	}
	withWaiting := rssMB(b)

	poolCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = sys.pool.Run(poolCtx) }()
	const running = 20
	inFlight.Add(running)
	for i := range running {
		task, _, err := sys.store.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformAPI, Channel: "run", Thread: strconv.Itoa(i)}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sys.dispatch.Create(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "run " + fmt.Sprint(i)}); err != nil {
			b.Fatal(err)
		}
	}
	inFlight.Wait()
	withRunning := rssMB(b)
	close(gate)
	stop()
	<-done

	b.ReportMetric(base, "base-MiB")
	b.ReportMetric(withWaiting, "rss-100k-waiting-MiB")
	b.ReportMetric((withWaiting-base)*1024/waiting, "KiB/waiting-task")
	b.ReportMetric((withRunning-withWaiting)/running, "MiB/running-job")
}

// makeWaiting makes the i-th task of the memory benchmark and a job of it
// that asked a question: created, claimed, started, finished waiting for
// a person and parked in the queue. The job claimed may be another
// maker's; each maker claims once for each job it created.
func makeWaiting(ctx context.Context, sys *system, i int64) error {
	task, _, err := sys.store.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformAPI, Channel: "mem", Thread: strconv.FormatInt(i, 10)}, Title: "waiting"})
	if err != nil {
		return err
	}
	if _, err := sys.dispatch.Create(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "a question"}); err != nil {
		return err
	}
	l, err := sys.queue.Claim(ctx, 10*time.Second)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if _, err := sys.store.StartJob(ctx, l.JobID, l.Attempt); err != nil {
		return err
	}
	w, err := sys.store.FinishJob(ctx, l.JobID, l.Attempt, core.Finish{To: core.JobWaitingHuman, Question: "which one?", ResumeMovement: "answer"})
	if err != nil {
		return err
	}
	return sys.queue.Park(ctx, l, w.WaitSeq)
}
