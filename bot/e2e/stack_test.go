package e2e_test

// The stack: Baton's whole system in-process for the tests of this package:
// a real SQLite store, the in-process queue, a worker pool running the engine
// with the built-in pieces and real tools (Bash unsandboxed), and the
// scripted LLM server.

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/configs"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/mcp"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/policy"
	"github.com/baton-bot/baton/core/sandbox"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/tokens"
	"github.com/baton-bot/baton/core/tools"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/queue"
)

// system is the running stack. Everything stops at the end of the test.
type system struct {
	LLM           *llmtest.Server
	Store         *sqlite.Store
	Queue         core.Queue
	Service       *chat.Service
	WorkspaceRoot string
	MaxFileBytes  int64 // Options.MaxFileBytes, for the deliverers a test adds
	// Stop ends the stack now, as the end of its process would: the pool,
	// the in-process queue and the store. The test's end does it too.
	Stop func()
}

// stackOptions configure startStack.
type stackOptions struct {
	Access chat.Access
	// Concurrency is the worker pool's (2 by default).
	Concurrency int
	// MaxFileBytes caps attachments (files.max_bytes); 0 keeps the
	// service's default.
	MaxFileBytes int64
	// Rules are the approvals policy's configured rules (none: every call
	// runs); ApprovalTimeout its timeout (1h).
	Rules           []policy.Rule
	ApprovalTimeout time.Duration
	// Dir, when set, holds the store and the workspaces, so that a second
	// stack over the same Dir is the same Baton after a restart.
	Dir string
	// MCP are the MCP servers whose tools the jobs get; MCPMaxTools is
	// mcp.max_tools (40).
	MCP         []mcp.ServerConfig
	MCPMaxTools int
	// Logger, when set, is the engine's and the MCP servers' log.
	Logger *slog.Logger
	// Progress is the live progress of each platform (none: the status
	// message alone).
	Progress map[core.Platform]chat.ProgressSettings

	// Prices and Budgets are the engine's (llm.prices, budgets).
	Prices  map[string]engine.Price
	Budgets engine.Budgets
	Guards  engine.Guards
}

// stackExternals gives the engine the MCP servers' tools, as bot does.
type stackExternals struct{ m *mcp.Manager }

func (x stackExternals) Open(_ context.Context, s engine.ExternalScope) engine.ExternalTools {
	return x.m.Open(mcp.Scope{Channel: s.Channel, Piece: s.Piece, Dir: s.Dir, Event: s.Event, Elicit: s.Ask})
}

// startStack builds and runs the stack for t.
func startStack(t testing.TB, opts stackOptions) *system {
	t.Helper()
	ctx := context.Background()
	wsRoot, dbDir := t.TempDir(), t.TempDir()
	if opts.Dir != "" {
		wsRoot, dbDir = filepath.Join(opts.Dir, "workspaces"), opts.Dir
	}
	st, err := sqlite.Open(ctx, filepath.Join(dbDir, "baton.db"), sqlite.Options{WorkspaceRoot: wsRoot})
	if err != nil {
		t.Fatal(err)
	}
	var stops []func()
	stopAll := sync.OnceFunc(func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	})
	t.Cleanup(stopAll)
	stops = append(stops, func() { st.Close() })
	sb, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.None})
	if err != nil {
		t.Fatal(err)
	}
	bash, err := tools.NewBash(tools.BashConfig{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	box := tools.Builtin(bash, nil)
	lib, err := piece.Load(configs.FS, "", piece.Rules{KnownTool: func(n string) bool { _, ok := box.Lookup(n); return ok }})
	if err != nil {
		t.Fatal(err)
	}
	srv := llmtest.NewServer(t)
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	q := queue.NewMemory(queue.Options{Lease: 5 * time.Second})
	stops = append(stops, func() { q.Close() })
	svc := chat.NewService(st, q, chat.Config{DefaultPiece: "chat", Pieces: lib, Access: opts.Access, MaxFileBytes: opts.MaxFileBytes, Progress: opts.Progress})
	ecfg := engine.Config{Model: "m", ContextWindow: 100000, Observer: svc,
		Gate: policy.New(opts.Rules, st), ApprovalTimeout: opts.ApprovalTimeout, Logger: opts.Logger}
	ecfg.Prices, ecfg.Budgets, ecfg.Guards = opts.Prices, opts.Budgets, opts.Guards
	if len(opts.MCP) > 0 {
		ecfg.Externals = stackExternals{m: mcp.New(mcp.Config{Servers: opts.MCP, MaxTools: opts.MCPMaxTools, Logger: opts.Logger})}
	}
	eng, err := engine.New(client, st, lib, box, tokens.Default(), ecfg)
	if err != nil {
		t.Fatal(err)
	}
	exec := worker.NewExecutor(st, q, eng, worker.ExecutorConfig{Notify: svc})
	pool := worker.NewPool(q, exec, worker.PoolConfig{
		Concurrency: max(opts.Concurrency, 2), Lease: 5 * time.Second, Heartbeat: time.Second, AbortPoll: 100 * time.Millisecond,
		ClaimWait: 100 * time.Millisecond, ShutdownGrace: time.Second,
	})
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = pool.Run(pctx) }()
	stops = append(stops, func() { stop(); <-done })
	return &system{LLM: srv, Store: st, Queue: q, Service: svc, WorkspaceRoot: wsRoot, MaxFileBytes: opts.MaxFileBytes, Stop: stopAll}
}
