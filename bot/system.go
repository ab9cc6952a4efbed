package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/configs"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/docparse"
	"github.com/baton-bot/baton/core/egress"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/mcp"
	"github.com/baton-bot/baton/core/outbox"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/policy"
	"github.com/baton-bot/baton/core/postgres"
	"github.com/baton-bot/baton/core/sandbox"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/tokens"
	"github.com/baton-bot/baton/core/tools"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/core/workspace"
	"github.com/baton-bot/baton/queue"
)

// system is Baton's machinery built from the configuration: the store, the
// queue, the engine and a worker pool, wired by hand.
type system struct {
	cfg      Config
	log      *slog.Logger
	store    store
	queue    core.Queue
	embedded bool        // the queue is the in-process one, its store's only queue
	tracer   core.Tracer // nil unless otel.enabled

	// queueName names the queue for people: "Redis at host:port" or "the
	// in-process queue".
	queueName string
	// redis is the Redis client of the queue; nil for the in-process one.
	redis     redis.UniversalClient
	redisAddr string // where Redis is, for people (redisTarget.name)

	pieces   *piece.Library
	sandbox  *sandbox.Sandbox // of Bash and git, probed at start
	gate     *policy.Policy   // the approvals policy the engine consults before each tool call
	mcp      *mcp.Manager     // the MCP servers; nil when none is configured
	egress   *egress.Proxy    // Bash's way out to the network; nil without egress configured
	engine   *engine.Engine
	pool     *worker.Pool
	dispatch worker.Dispatch
	rec      *worker.Reconciler
	chat     *chat.Service // nil unless systemOptions.converse or decide
	metrics  *metrics
	floor    *workspace.Floor                       // data_dir's free-space floor: tools and /readyz
	ready    map[string]func(context.Context) error // adapters' readiness, by name
	notes    map[string]func() string               // what /readyz says of a ready adapter, by name
	closers  []func() error

	heartbeatEvery time.Duration // of /readyz's store heartbeat; 0: heartbeatEvery (tests shorten it)

	// owner names this process's deliverers in the outbox claims they
	// take (outbox.Config.Owner): one id for all of them, another for
	// every other process sharing the store.
	owner string

	mu         sync.Mutex
	deliverers []*outbox.Deliverer // guarded by mu
	expiryOnce sync.Once           // starts the approvals timeout sweep
	running    sync.WaitGroup      // the deliverers' loops
}

// systemOptions choose what a command needs.
type systemOptions struct {
	// role is the command, named in traces (otel.enabled).
	role string
	// embedded forces the in-process queue whatever redis.url says
	// (baton run, baton chat).
	embedded bool
	// converse builds the conversation service: jobs tell their threads
	// about their progress through the outbox.
	converse bool
	// decide builds the conversation service without wiring it to the
	// jobs: baton run decides approvals through it, and its jobs tell no
	// thread.
	decide bool
	// stepper, when set, is told each step of the jobs as well (baton
	// chat's and baton run's spinner and tool lines); when it is a
	// texter, the answers' text as the model writes it too.
	stepper engine.Stepper
	// workspaces says what to do with workspaces the store does not know
	// (--adopt-workspaces, --discard-workspaces); the zero value refuses
	// to start.
	workspaces workspace.Policy
}

// deliver starts a deliverer of platform's outbox through poster, until ctx
// ends; the conversation service wakes it whenever it writes. stopped is
// closed once it has stopped: its deliveries under way have returned and
// it is woken no more.
func (s *system) deliver(ctx context.Context, platform core.Platform, poster chat.Poster) (d *outbox.Deliverer, stopped <-chan struct{}) {
	d = outbox.New(s.store, platform, poster, outbox.Config{
		Owner: s.owner, Split: chattext.Split, Logger: s.log.With("platform", string(platform)),
		MaxFileBytes: s.cfg.Files.MaxBytes, Locale: s.cfg.Locale,
	})
	s.mu.Lock()
	s.deliverers = append(s.deliverers, d)
	s.mu.Unlock()
	done := make(chan struct{})
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		defer close(done)
		_ = d.Run(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.deliverers = slices.DeleteFunc(s.deliverers, func(o *outbox.Deliverer) bool { return o == d })
	}()
	if s.chat != nil {
		// Where threads are delivered, undecided approvals are denied once
		// their time is up; once per process, whatever the platforms.
		s.expiryOnce.Do(func() {
			s.running.Add(1)
			go func() {
				defer s.running.Done()
				s.chat.RunExpiry(ctx, approvalSweep(s.cfg.Approvals.Timeout))
			}()
		})
	}
	return d, done
}

// processOwner is an id of this process for the outbox claims its
// deliverers take: the host and the process, which say in the store who
// holds a claim, and a random part, which keeps it apart from an earlier
// process's of the same pid (a restarted container).
func processOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), rand.Text()[:8])
}

// approvalSweep is how often undecided approvals past their deadline are
// looked for, for approvals.timeout: a quarter of it, between 1 s and
// 15 s, so that a timeout is honoured within that.
func approvalSweep(timeout time.Duration) time.Duration {
	return min(max(timeout/4, time.Second), 15*time.Second)
}

// kick wakes every deliverer.
func (s *system) kick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.deliverers {
		d.Kick()
	}
}

// storePath is the SQLite file of the store: database.url's sqlite:PATH,
// else baton.db under data_dir; "" when the store is PostgreSQL.
func storePath(cfg Config) string {
	switch u := cfg.Database.URL; {
	case u == "":
		return filepath.Join(cfg.DataDir, "baton.db")
	case strings.HasPrefix(u, "sqlite:"):
		return strings.TrimPrefix(u, "sqlite:")
	}
	return ""
}

// storeName names the store for people: its file, or its PostgreSQL URL
// without the password.
func storeName(cfg Config) string {
	if p := storePath(cfg); p != "" {
		return p
	}
	return redactURL(cfg.Database.URL)
}

// workspaceRoot holds the tasks' workspaces: workspaces.root, or
// data_dir/workspaces when it is empty.
func workspaceRoot(cfg Config) string {
	if cfg.Workspaces.Root != "" {
		return cfg.Workspaces.Root
	}
	return filepath.Join(cfg.DataDir, "workspaces")
}

// store is what Baton needs of its system of record, SQLite's or
// PostgreSQL's: core.Store, what workspace.Claim reads, the tiny write of
// /readyz's heartbeat, and the migrations.
type store interface {
	core.Store
	workspace.Owner
	Heartbeat(ctx context.Context) error
	Migrate(ctx context.Context) error
}

var (
	_ store = (*sqlite.Store)(nil)
	_ store = (*postgres.Store)(nil)
)

// openStore opens (and migrates) the store database.url names.
func openStore(ctx context.Context, cfg Config, log *slog.Logger) (store, error) {
	if path := storePath(cfg); path != "" {
		st, err := sqlite.Open(ctx, path, sqlite.Options{WorkspaceRoot: workspaceRoot(cfg), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open the store %s: %w", path, err)
		}
		return st, nil
	}
	st, err := postgres.Open(ctx, cfg.Database.URL, postgres.Options{
		MaxConns: int32(cfg.Database.MaxConns), StatementTimeout: cfg.Database.StatementTimeout,
		ConnectRetries: cfg.Database.ConnectRetries, WorkspaceRoot: workspaceRoot(cfg), Logger: log,
	})
	if err != nil {
		if errors.Is(err, postgres.ErrAccessDenied) {
			return nil, &ConfigError{Key: "database.url", Msg: fmt.Sprintf("PostgreSQL at %s refused the credentials (DATABASE_URL): %v", storeName(cfg), err)}
		}
		return nil, fmt.Errorf("open the PostgreSQL store at %s: %w", storeName(cfg), err)
	}
	return st, nil
}

// The flags that say what to do with workspaces the store does not know.
const (
	adoptFlag   = "adopt-workspaces"
	discardFlag = "discard-workspaces"
)

// claimWorkspaces makes data_dir's workspaces/ the store's before any job
// runs (see workspace.Claim): when it holds workspaces that no task of the
// store names, the store is new or was replaced, and starting would hand
// another person's files to new tasks, so it refuses (an error wrapping
// workspace.ErrForeign) unless policy says to adopt or discard them.
func claimWorkspaces(ctx context.Context, cfg Config, st store, policy workspace.Policy, log *slog.Logger) error {
	got, err := workspace.Claim(ctx, workspaceRoot(cfg), st, policy)
	if err != nil {
		return err
	}
	switch {
	case got.MovedTo != "":
		log.Warn("workspaces this store does not know were moved aside", "count", len(got.Foreign), "to", got.MovedTo)
	case len(got.Foreign) > 0:
		log.Warn("workspaces this store does not know were adopted", "count", len(got.Foreign), "dir", workspaceRoot(cfg))
	}
	return nil
}

// openSandbox builds and probes the one sandbox of Bash and git
// (tools.bash.sandbox, tools.bash.network, tools.sandbox).
func openSandbox(ctx context.Context, cfg Config, log *slog.Logger) (*sandbox.Sandbox, error) {
	sc := cfg.Tools.Sandbox
	sb, err := sandbox.New(ctx, sandbox.Config{
		Mode: cfg.Tools.Bash.Sandbox, UID: sc.UID, GID: sc.GID,
		Limits: sandbox.Limits{
			Processes: sc.MaxProcesses, AddressSpaceBytes: sc.MaxMemoryBytes,
			OpenFiles: sc.MaxOpenFiles, FileBytes: sc.MaxFileBytes,
		},
		Network:    cfg.Tools.Bash.Network == "allow_pieces",
		Workspaces: workspaceRoot(cfg),
		Bridge:     bridgeBinary(cfg, log),
		Logger:     log,
	})
	if err != nil {
		return nil, fmt.Errorf("tools.bash.sandbox: %w", err)
	}
	return sb, nil
}

// loadTools builds the tool set; Bash runs in sb. ReadDocument and
// ReadImage parse in a child: this binary re-executed as `baton
// internal-parse`, with its own CPU, memory and file limits, killed on
// timeout and abort.
func loadTools(cfg Config, sb *sandbox.Sandbox, log *slog.Logger) (*tools.Set, error) {
	bash, err := tools.NewBash(tools.BashConfig{Sandbox: sb, Timeout: cfg.Tools.Bash.Timeout, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("tools.bash: %w", err)
	}
	return tools.Builtin(bash, parser(sb, log)), nil // the sandbox has logged why, when Bash is disabled
}

// loadPieces loads the built-in pieces and pieces_dir, once: jobs use
// this set and never read pieces_dir again. It refuses a pieces_dir inside
// the workspaces. A movement asking for the network is refused unless
// tools.bash.network allows it and the sandbox can give it.
func loadPieces(cfg Config, set *tools.Set, sb *sandbox.Sandbox) (*piece.Library, error) {
	if err := piecesOutsideWorkspaces(cfg); err != nil {
		return nil, err
	}
	rules := piece.Rules{KnownTool: func(name string) bool { _, ok := set.Lookup(name); return ok }}
	switch {
	case cfg.Tools.Bash.Network != "allow_pieces":
		rules.NoNetwork = "the operator has not allowed network access (tools.bash.network: " + cfg.Tools.Bash.Network + "; set it to allow_pieces)"
	case sb.Network() != nil:
		rules.NoNetwork = fmt.Sprintf("tools.bash.network is allow_pieces, but the sandbox cannot give the network here: %v", sb.Network())
	}
	lib, err := piece.Load(configs.FS, cfg.PiecesDir, rules)
	if err != nil {
		return nil, &piecesError{err: err}
	}
	if err := unpricedModel(cfg, lib); err != nil {
		return nil, err
	}
	return lib, nil
}

// parser is the Runner of the parser child; nil (ReadDocument disabled) when
// this binary cannot be found to re-execute. Where the sandbox works the
// child runs in it, with no file of the host bound: the binary is handed
// in as an open file (descriptor 3, run as /proc/self/fd/3), so that it
// runs wherever it is installed, even in a directory the sandbox's user
// cannot enter. Elsewhere the child runs with its own limits only.
func parser(sb *sandbox.Sandbox, log *slog.Logger) tools.Parser {
	exe, err := os.Executable()
	if err != nil {
		log.Warn("ReadDocument is disabled and ReadImage checks image headers only: the baton binary cannot be found to run the parser child", "err", err)
		return nil
	}
	if ok, _ := sb.Available(); !ok || !sb.Isolated() {
		return &docparse.Runner{Command: docparse.Exec(exe, docparse.Subcommand), Logger: log}
	}
	bin, err := os.Open(exe) // kept open for the life of the process
	if err != nil {
		log.Warn("ReadDocument is disabled and ReadImage checks image headers only: the baton binary cannot be opened to run the parser child", "err", err)
		return nil
	}
	// The child lowers its own address-space limit from its start size,
	// which for a Go program is above the sandbox's default.
	lim := sb.Limits()
	lim.AddressSpaceBytes = max(lim.AddressSpaceBytes, 8<<30)
	lim.CPUSeconds = 120
	return &docparse.Runner{Logger: log, Command: func(ctx context.Context) (*exec.Cmd, error) {
		c, err := sb.Command(ctx, sandbox.Spec{Argv: []string{"/proc/self/fd/3", docparse.Subcommand}, Limits: &lim, NoCgroup: true})
		if err != nil {
			return nil, err
		}
		c.ExtraFiles = []*os.File{bin}
		return c.Cmd, nil
	}}
}

// piecesOutsideWorkspaces refuses a pieces_dir at or under data_dir's
// workspaces/, symlinks evaluated: an agent writes there, and a piece it
// wrote would run with what the piece asks for (network: true, say).
func piecesOutsideWorkspaces(cfg Config) error {
	if cfg.PiecesDir == "" || cfg.DataDir == "" {
		return nil
	}
	pieces, ws := realPath(cfg.PiecesDir), realPath(workspaceRoot(cfg))
	if rel, err := filepath.Rel(ws, pieces); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return &ConfigError{Key: "pieces_dir", Msg: fmt.Sprintf(
			"%s is inside the workspaces of data_dir (%s), which agents write; keep pieces_dir outside data_dir's workspaces/ folder",
			cfg.PiecesDir, ws)}
	}
	return nil
}

// realPath returns p absolute with the symlinks of its existing part
// evaluated; the missing rest is joined as written.
func realPath(p string) string {
	p, _ = filepath.Abs(p)
	var rest []string
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// newSystem builds the machinery.
func newSystem(ctx context.Context, cfg Config, log *slog.Logger, opts systemOptions) (_ *system, err error) {
	sys := &system{cfg: cfg, log: log, metrics: newMetrics(), owner: processOwner()}
	defer func() {
		if err != nil {
			sys.Close()
		}
	}()
	if err := sys.startTracer(ctx, opts.role); err != nil {
		return nil, err
	}
	// A mistake in the configuration is reported before anything on disk
	// is looked at or changed.
	if err := checkPieces(cfg); err != nil {
		return nil, err
	}
	rules, errs := cfg.Approvals.policyRules()
	if len(errs) > 0 {
		return nil, joinConfigErrors(errs) // Validate refuses them first
	}
	if sys.store, err = openStore(ctx, cfg, log); err != nil {
		return nil, err
	}
	sys.closers = append(sys.closers, sys.store.Close)
	if err := claimWorkspaces(ctx, cfg, sys.store, opts.workspaces, log); err != nil {
		return nil, err
	}

	sb, err := openSandbox(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	sys.sandbox = sb
	set, err := loadTools(cfg, sb, log)
	if err != nil {
		return nil, err
	}
	if sys.pieces, err = loadPieces(cfg, set, sb); err != nil {
		return nil, err
	}
	if _, ok := sys.pieces.Lookup(cfg.DefaultPiece); !ok {
		return nil, &ConfigError{Key: "default_piece", Msg: fmt.Sprintf("no piece named %q (pieces: %v)", cfg.DefaultPiece, sys.pieces.Names())}
	}
	if errs := cfg.MCP.pieceProblems(func(name string) bool { _, ok := sys.pieces.Lookup(name); return ok }); len(errs) > 0 {
		return nil, joinConfigErrors(errs)
	}
	sys.mcp = mcpManager(cfg, sys.metrics, log)
	if sys.egress, err = sys.openEgress(sb); err != nil {
		return nil, err
	}
	provider, _ := modelProvider(ctx, cfg.LLM, nil, log)
	model, err := llm.New(llm.Config{
		BaseURL: cfg.LLM.BaseURL, APIKey: cfg.LLM.APIKey.Reveal(), Model: cfg.LLM.Model,
		Timeout: cfg.LLM.RequestTimeout, MaxRetries: cfg.LLM.MaxRetries, Logger: log,
		Stream: cfg.LLM.Stream, Provider: provider, ReasoningEffort: cfg.LLM.ReasoningEffort,
		NumCtx: cfg.LLM.ContextWindow,
	})
	if err != nil {
		return nil, &ConfigError{Key: "llm.base_url", Msg: err.Error()}
	}
	qopts := queue.Options{Lease: cfg.Queue.Lease, Logger: log}
	if opts.embedded || !cfg.Redis.enabled() {
		mem := queue.NewMemory(qopts)
		sys.queue, sys.embedded, sys.queueName = mem, true, "the in-process queue"
		sys.closers = append(sys.closers, mem.Close)
	} else {
		// The queue's keys are named after the store: a new or replaced
		// store never meets another store's jobs in a Redis they shared
		// (its job ids start at 1 again); the reconciler dispatches the
		// store's own jobs into its keys.
		id, err := sys.store.StoreID(ctx)
		if err != nil {
			return nil, fmt.Errorf("the store's id, which names its queue: %w", err)
		}
		qopts.Prefix = queuePrefix(id)
		// Redis is not asked anything yet: connectQueue waits for it, so
		// that what needs no queue (HTTP, the adapters) starts without it.
		rq, client, addr, err := newRedisQueue(cfg.Redis, qopts)
		if err != nil {
			return nil, err
		}
		sys.queue, sys.redis, sys.redisAddr = rq, client, addr
		sys.queueName = "Redis at " + sys.redisAddr
		sys.closers = append(sys.closers, client.Close)
	}
	sys.gate = policy.New(rules, sys.store)
	var observer engine.Observer
	var notifier worker.Notifier
	if opts.converse || opts.decide {
		sys.chat = chat.NewService(sys.store, sys.queue, chat.Config{
			DefaultPiece: cfg.DefaultPiece, Pieces: sys.pieces, MCP: sys.chatMCP(), Locale: cfg.Locale, MaxFileBytes: cfg.Files.MaxBytes, Models: cfg.LLM.Models,
			Access: chatAccess(cfg), Kick: sys.kick, Logger: log, Tracer: sys.tracer, Progress: chatProgress(cfg),
		})
		if opts.converse {
			observer, notifier = sys.chat, sys.chat
		}
	}
	var onText func(int64, string)
	var onTextRestart func(int64)
	if opts.stepper != nil {
		observer = observers{status: observer, steps: opts.stepper}
		if t, ok := opts.stepper.(texter); ok {
			onText, onTextRestart = t.Text, t.TextRestart
		}
	}
	sys.floor = workspace.NewFloor(workspace.FloorConfig{Dir: cfg.DataDir, MinFreeBytes: cfg.Workspaces.MinFreeBytes, Logger: log})
	loc, err := time.LoadLocation(cfg.Timezone)
	if err != nil {
		return nil, &ConfigError{Key: "timezone", Msg: err.Error()}
	}
	sys.engine, err = engine.New(model, sys.store, sys.pieces, set, tokens.ForModel(cfg.LLM.Model), engine.Config{
		Locale: cfg.Locale, Location: loc, Model: cfg.LLM.Model, DefaultPiece: cfg.DefaultPiece,
		ContextWindow: cfg.LLM.ContextWindow, MaxOutputTokens: cfg.LLM.MaxOutputTokens, MaxTokensPerJob: cfg.LLM.MaxTokensPerJob,
		Levels: engine.Levels{
			Warn: cfg.Context.Warn, Prompt: cfg.Context.Prompt, Force: cfg.Context.ForceTransition, Exhausted: cfg.Context.Exhausted,
		},
		Compaction: engine.Compaction{
			Enabled: cfg.Context.Compaction == "on", Mask: cfg.Context.Mask, Compact: cfg.Context.Compact,
		},
		ToolResultMaxTokens: cfg.Context.ToolResultMaxTokens, ReminderAfter: cfg.Agent.ReminderAfter,
		WorkspaceRoot: workspaceRoot(cfg), MaxWorkspaceBytes: cfg.Workspaces.MaxBytes,
		Floor: sys.floor, Gate: sys.gate, ApprovalTimeout: cfg.Approvals.Timeout,
		Sandbox: sb, Observer: observer, Meter: sys.metrics, Logger: log, Tracer: sys.tracer,
		OnText: onText, OnTextRestart: onTextRestart,
		Externals: sys.externals(),
		Egress:    sys.egress,

		Prices: enginePrices(cfg), Budgets: engineBudgets(cfg), Guards: engineGuards(cfg),
	})
	if err != nil {
		return nil, err
	}

	sys.dispatch = worker.Dispatch{Store: sys.store, Queue: sys.queue}
	exec := worker.NewExecutor(sys.store, sys.queue, sys.engine, worker.ExecutorConfig{MaxFailures: cfg.Queue.MaxFailures, Notify: notifier, Meter: sys.metrics, Logger: log, Tracer: sys.tracer})
	sys.pool = worker.NewPool(sys.queue, exec, worker.PoolConfig{
		Concurrency: cfg.Workers.Concurrency, Lease: cfg.Queue.Lease, Heartbeat: cfg.Queue.Heartbeat,
		ShutdownGrace: cfg.Workers.ShutdownGrace, MaxFailures: cfg.Queue.MaxFailures,
		OnDead: worker.DeadJobs(sys.store, log), Meter: sys.metrics, Logger: log,
	})
	sys.rec = &worker.Reconciler{Store: sys.store, Queue: sys.queue, Logger: log}
	return sys, nil
}

// chatAccess is who may use Baton and decide its approvals, as the
// conversation service takes it.
func chatAccess(cfg Config) chat.Access {
	return chat.Access{
		Admins: cfg.Access.Admins, AllowedUsers: cfg.Access.AllowedUsers, AllowedChannels: cfg.Access.AllowedChannels,
		AbortBy: cfg.Access.AbortBy, AnswerBy: cfg.Access.AnswerBy,
		Approvers: cfg.Approvals.Approvers,
	}
}

// recoverJobs dispatches the jobs an earlier process left queued or
// running. On the in-process queue each one is an orphan, taken over at
// once (worker.Reconciler.Recover); with Redis they belong to whoever holds
// their leases, and the reconciler's periodic pass finds those the queue
// lost. Call it before this process creates or claims any job.
func (s *system) recoverJobs(ctx context.Context) error {
	if !s.embedded {
		return nil
	}
	if _, err := s.rec.Recover(ctx); err != nil {
		return fmt.Errorf("take up the jobs an earlier process left: %w", err)
	}
	return nil
}

// newRedisQueue returns the queue on the Redis (one server, a Sentinel
// master or a cluster) that c names, and where that is for people, asking
// Redis nothing: connectQueue waits for it to answer.
func newRedisQueue(c RedisConfig, opts queue.Options) (*queue.Redis, redis.UniversalClient, string, error) {
	target, err := parseRedis(c)
	if err != nil {
		return nil, nil, "", err
	}
	routeRedisLogs(opts.Logger)
	// Baton retries the first contact itself, with a message each time.
	client := target.client(redisTuning{DialerRetries: 1})
	q, err := queue.NewRedis(client, opts)
	if err != nil {
		client.Close()
		return nil, nil, "", err
	}
	return q, client, target.name, nil
}

// queuePrefix is the Redis key prefix of the store with id storeID:
// "baton:" and the id's first 16 letters and digits.
func queuePrefix(storeID string) string {
	var b strings.Builder
	for _, r := range storeID {
		if b.Len() == 16 {
			break
		}
		if ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		}
	}
	return queue.DefaultPrefix + ":" + b.String()
}

// connectQueue waits until the queue answers, retrying Redis with backoff
// until it answers or ctx ends: a Redis that is still starting is waited
// for, never replaced by the in-process queue. It reports whether it had
// to wait (Redis did not answer the first time); the in-process queue
// answers at once.
func (s *system) connectQueue(ctx context.Context) (waited bool, err error) {
	if s.redis == nil {
		return false, nil
	}
	delay := 200 * time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.redis.Ping(pctx).Err()
		cancel()
		if err == nil {
			if waited {
				s.log.Info("Redis answers", "addr", s.redisAddr)
			}
			return waited, nil
		}
		waited = true
		s.log.Warn("Redis is not answering; retrying", "addr", s.redisAddr, "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return true, fmt.Errorf("connect to Redis at %s: %w", s.redisAddr, errors.Join(err, ctx.Err()))
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// redisLogs sends go-redis's own log lines (dial failures, reconnects) to
// Baton's logger instead of the standard logger.
type redisLogs struct{ log *slog.Logger }

func (r redisLogs) Printf(ctx context.Context, format string, args ...any) {
	r.log.Debug(fmt.Sprintf(format, args...), "component", "redis")
}

var redisLogsOnce sync.Once

// routeRedisLogs installs redisLogs; go-redis keeps one logger per process.
// A nil log installs nothing.
func routeRedisLogs(log *slog.Logger) {
	if log == nil {
		return
	}
	redisLogsOnce.Do(func() { redis.SetLogger(redisLogs{log: log}) })
}

// redactURL returns raw for messages, the log and `baton config`: its user
// information (a password, or a token put before the host) shows as
// [redacted].
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	if u.User == nil {
		return raw
	}
	u.User = nil
	scheme := u.Scheme + "://"
	return scheme + redacted + "@" + strings.TrimPrefix(u.String(), scheme)
}

// Close releases everything, last opened first, once the deliverers (whose
// contexts the caller has ended) have stopped, for at most 5 s.
func (s *system) Close() error {
	stopped := make(chan struct{})
	go func() {
		s.running.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		s.log.Warn("deliverers still running at close")
	}
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// chatProgress is the live progress of each chat platform (progress:).
func chatProgress(cfg Config) map[core.Platform]chat.ProgressSettings {
	return map[core.Platform]chat.ProgressSettings{
		core.PlatformSlack:   {Stream: cfg.Progress.Slack.Stream, Interval: cfg.Progress.Slack.Interval},
		core.PlatformDiscord: {Stream: cfg.Progress.Discord.Stream, Interval: cfg.Progress.Discord.Interval},
	}
}
