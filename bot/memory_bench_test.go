package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
// system `baton serve` builds, on the embedded defaults) holding 10,000
// tasks whose jobs wait for an answer, and the memory each running job
// adds while its model call is out (tool processes excluded).
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

	const waiting = 10_000
	for i := range waiting {
		task, _, err := sys.store.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformAPI, Channel: "mem", Thread: strconv.Itoa(i)}, Title: "waiting"})
		if err != nil {
			b.Fatal(err)
		}
		j, err := sys.dispatch.Create(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "a question"})
		if err != nil {
			b.Fatal(err)
		}
		l, err := sys.queue.Claim(ctx, time.Second)
		if err != nil || l.JobID != j.ID {
			b.Fatalf("claim: %v", err)
		}
		if _, err := sys.store.StartJob(ctx, j.ID, l.Attempt); err != nil {
			b.Fatal(err)
		}
		w, err := sys.store.FinishJob(ctx, j.ID, l.Attempt, core.Finish{To: core.JobWaitingHuman, Question: "which one?", ResumeMovement: "answer"})
		if err != nil {
			b.Fatal(err)
		}
		if err := sys.queue.Park(ctx, l, w.WaitSeq); err != nil {
			b.Fatal(err)
		}
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
	b.ReportMetric(withWaiting, "rss-10k-waiting-MiB")
	b.ReportMetric((withRunning-withWaiting)/running, "MiB/running-job")
}
