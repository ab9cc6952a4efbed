package main

import (
	"context"

	"github.com/baton-bot/baton/adapters/console"
	"github.com/baton-bot/baton/core"
)

// chatSession runs `baton chat`: a terminal thread on the embedded
// defaults, with the workers and the console's outbox deliverer in this
// process.
func (m *Main) chatSession(ctx context.Context) error {
	sys, err := newSystem(ctx, m.Config, m.Logger, systemOptions{embedded: true, converse: true, workspaces: m.workspaces})
	if err != nil {
		return m.systemErr("chat", err)
	}
	defer sys.Close()
	// Jobs that an earlier process left queued or running are taken up.
	if err := sys.recoverJobs(ctx); err != nil {
		return err
	}
	_, userName := consoleUser(m.Env)
	term := console.New(sys.chat, m.Stdin, m.Stdout, userName)

	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	poolDone := make(chan struct{})
	go func() {
		defer close(poolDone)
		_ = sys.pool.Run(runCtx)
	}()
	d := sys.deliver(runCtx, core.PlatformConsole, term)
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
