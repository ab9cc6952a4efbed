package main

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-bot/baton/adapters/console"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/outbox"
)

// chatSession runs `baton chat`: a terminal thread on the embedded
// defaults, with the workers and the console's outbox deliverer in this
// process. The log goes to data_dir/logs/baton-chat.log unless
// jf.verbose; the console sees each job's steps (its spinner and tool
// lines) and the model's retries. With input that is not a terminal (a
// pipe, a file, /dev/null) each line is taken once the jobs of the line
// before have settled, to the end of the input.
func (m *Main) chatSession(ctx context.Context, jf jobFlags) error {
	var n notices
	logLines, closeLog, err := m.consoleLog("chat", jf.verbose, &n)
	if err != nil {
		return err
	}
	defer closeLog()
	steps := &stepRelay{}
	sys, err := newSystem(ctx, m.Config, m.Logger, systemOptions{role: "chat", embedded: true, converse: true, stepper: steps, workspaces: m.workspaces})
	if err != nil {
		return m.systemErr("chat", err)
	}
	defer sys.Close()
	// Jobs that an earlier process left queued or running are taken up.
	if err := sys.recoverJobs(ctx); err != nil {
		return err
	}
	_, userName := consoleUser(m.Env)

	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var d *outbox.Deliverer
	term := console.New(sys.chat, m.Stdin, m.Stdout, userName, console.Options{
		Terminal: isTerminal(m.Stdout), Width: termWidth(m.Stdout), Echo: !isTerminal(m.Stdin),
		Settle: func(ctx context.Context) error { return settle(ctx, sys, d) },
	})
	steps.set(term)
	n.set(term.Notice)
	if logLines != nil {
		logLines.set(term.Print)
		defer logLines.set(nil)
	}

	poolDone := make(chan struct{})
	go func() {
		defer close(poolDone)
		_ = sys.pool.Run(runCtx)
	}()
	d, _ = sys.deliver(runCtx, core.PlatformConsole, term)
	defer func() {
		stop()
		<-poolDone
		// What the jobs said while stopping still reaches the terminal.
		fctx, cancel := context.WithTimeout(context.Background(), 2e9)
		defer cancel()
		_, _ = d.Flush(fctx)
	}()
	return term.Run(ctx)
}

// settleEvery is how often settle looks at the jobs again.
const settleEvery = 50 * time.Millisecond

// settle returns once no job is queued or running (each has finished, or
// waits for a person or for its subtasks) and the console's outbox has
// nothing due: what the jobs said is printed.
func settle(ctx context.Context, sys *system, d *outbox.Deliverer) error {
	for {
		active, err := sys.store.Jobs(ctx, core.JobFilter{States: []core.JobState{core.JobQueued, core.JobRunning}, Limit: 1})
		if err != nil {
			return fmt.Errorf("the jobs under way: %w", err)
		}
		sent, err := d.Flush(ctx)
		if err != nil {
			return fmt.Errorf("deliver to the console: %w", err)
		}
		if len(active) == 0 && sent == 0 {
			due, err := sys.store.DueOutbox(ctx, core.PlatformConsole, time.Now(), 1)
			if err != nil {
				return fmt.Errorf("the console's outbox: %w", err)
			}
			if len(due) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(settleEvery):
		}
	}
}
