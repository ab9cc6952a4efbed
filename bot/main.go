// Command baton runs Baton, the chat-ops bot that runs LLM agents from Slack
// and Discord threads. One binary holds every process shape: `baton serve`
// (everything in one process), `baton gateway` and `baton worker` (split
// around Redis), `baton chat` and `baton run` (a console thread or one job on
// the embedded defaults), and the maintenance commands.
//
// This package is the only one that reads files and the environment: it
// loads the configuration, constructs every component by hand, top to
// bottom, and runs them. Main is the program as a value, so end-to-end tests
// start the real thing in-process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/docparse"
	"github.com/baton-bot/baton/core/egress"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/workspace"
)

// version is set at build time: go build -ldflags "-X main.version=1.2.3"
// (make build does). Without it, `baton version` takes the module version
// from the build information (see versionText).
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m := NewMain()
	err := m.Run(ctx, os.Args[1:])
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	stop()
	os.Exit(m.Report(err))
}

// Exit codes shared by every command (`baton run` adds 3 and 4, SPEC §2).
const (
	exitOK          = 0
	exitInternal    = 1
	exitUsage       = 2 // usage or configuration error
	exitInterrupted = 130
)

// Main is the baton program. Set its fields (or keep NewMain's) before Run;
// a Main runs one command and is not safe for concurrent use.
type Main struct {
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Env     func(string) string // the environment; os.Getenv in production
	Version string

	// Set by Run for the commands that load a configuration.
	Config Config
	Logger *slog.Logger
	// origins says where each value of Config came from.
	origins Origins

	// workspaces is what --adopt-workspaces or --discard-workspaces said
	// to do with workspaces the store does not know (see claimWorkspaces).
	workspaces workspace.Policy
	// listener opens the listener of a config key (http.addr, admin.addr);
	// nil: listen. Tests hand in listeners that fail.
	listener func(key, addr string) (net.Listener, error)
	// leases, when set, wraps the store's leases (core.LeaseStore) that
	// gateways hold: tests hand in leases that are never released, as a
	// killed process leaves them.
	leases func(core.LeaseStore) core.LeaseStore
	// describe, when set, receives the flag sets of a command run with
	// --help instead of their help being printed: `baton completion`
	// collects the flags so. setup refuses to go on while it is set.
	describe func(cmd string, sets []namedFlags)
}

// NewMain returns a Main wired to the process: standard streams, the real
// environment and the version set at build time.
func NewMain() *Main {
	return &Main{
		Stdin:   os.Stdin,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Env:     os.Getenv,
		Version: version,
	}
}

// Close releases what Run started. It is safe to call after a failed Run.
func (m *Main) Close() error { return nil }

// exitError carries an exit code. reported means the message is already on
// stderr (the flag package prints its own errors).
type exitError struct {
	code     int
	err      error
	reported bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error from Run to the process exit code: 0 for nil, the
// code an error carries, 130 after an interrupt, 2 for a configuration
// error (the pieces' included), and 1 for anything else.
func ExitCode(err error) int {
	var ee *exitError
	var ce *ConfigError
	var pe *piecesError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &ce), errors.As(err, &pe):
		return exitUsage
	default:
		return exitInternal
	}
}

// Report writes err to Stderr (unless already written) and returns the exit
// code for it.
func (m *Main) Report(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) || !ee.reported {
		fmt.Fprintln(m.Stderr, err)
	}
	return ExitCode(err)
}

// command is one `baton <name>` subcommand.
type command struct {
	name    string
	args    string // synopsis after the name
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

var commands []command

func init() {
	// Assigned here, not in the declaration, because help refers to commands.
	commands = []command{
		{"serve", "[--config FILE] [--adopt-workspaces|--discard-workspaces]", "run everything in one process: adapters, deliverers, workers, HTTP", (*Main).serve},
		{"gateway", "[--config FILE] [--adopt-workspaces|--discard-workspaces]", "run adapters, deliverers and HTTP, without workers (needs Redis)", (*Main).gateway},
		{"worker", "[--config FILE] [--adopt-workspaces|--discard-workspaces]", "run workers only (needs Redis)", (*Main).worker},
		{"chat", "[--config FILE] [--data-dir DIR] [--piece P] [--verbose] [--adopt-workspaces|--discard-workspaces]", "talk to Baton in an interactive console thread", (*Main).chat},
		{"run", `[--config FILE] [--data-dir DIR] [--piece P] [--verbose] [--task N] [--adopt-workspaces|--discard-workspaces] ("instruction" | --approve | --deny [--reason TEXT])`, "run one job in this process; the answer goes to stdout (--task N --approve|--deny: decide its call waiting for approval)", (*Main).runJob},
		{"init", "[--non-interactive] [--slack socket|http|off] [--discord on|off] [--provider P] [--base-url URL] [--model M] [--api-key-env VAR] [--data-dir DIR] [--discord-app-id ID] [--config FILE] [--force]", "write baton.yaml and .env for a first setup, then run baton doctor", (*Main).initSetup},
		{"doctor", "[--config FILE] [--json]", "check the setup: config, data_dir, store, queue, model, sandbox, Slack, Discord; one line each, with what to change", (*Main).doctor},
		{"tasks", "list [--state S] [--limit N] [--json] | show N [--json] | logs N [--job J] [--json]", "list the tasks, show one with its comments and jobs, or a job's movement logs and tool calls", (*Main).tasks},
		{"pieces", "validate [--config FILE] [FILES] | list [--config FILE]", "check piece files, or list the pieces", (*Main).pieces},
		{"mcp", "list [--config FILE]", "start each configured MCP server, list its tools (allowed, needs approval, denied, disabled) and say what failed", (*Main).mcpCommand},
		{"migrate", "[--config FILE]", "apply the database migrations", (*Main).migrate},
		{"store", "copy --from sqlite:PATH --to postgres://…", "copy a SQLite store into an empty PostgreSQL database (the move to PostgreSQL)", (*Main).store},
		{"config", "[--config FILE]", "print the effective configuration, secrets redacted, with where each value came from", (*Main).showConfig},
		{egress.BridgeSubcommand, "[--socket PATH] [--listen ADDR] [--locale LOCALE] -- COMMAND [ARGS]", "inside a command's sandbox: relay 127.0.0.1:3128 to the egress proxy and run COMMAND behind it (the sandbox starts it)", (*Main).sandboxBridge},
		{"completion", "bash|zsh|fish", "print the shell completion script", (*Main).completion},
		{"version", "", "print the version, the VCS revision and the Go toolchain", (*Main).printVersion},
		{"help", "[COMMAND]", "show this help, or a command's", (*Main).help},
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// Run runs the command named by args[0] with the rest of args, and returns
// when it is done (long-running commands: when ctx ends). Its error maps to
// an exit code with ExitCode; Report prints it.
func (m *Main) Run(ctx context.Context, args []string) error {
	// The logger and the progress lines write from different goroutines:
	// one lock keeps their lines whole, whatever Stderr is.
	if _, ok := m.Stderr.(*lockedWriter); !ok {
		m.Stderr = &lockedWriter{w: m.Stderr}
	}
	if len(args) == 0 {
		m.usage(m.Stderr)
		return &exitError{code: exitUsage, err: errors.New("baton: a command is required"), reported: true}
	}
	switch args[0] {
	case docparse.Subcommand:
		// Hidden: the parser child that ReadDocument and ReadImage start
		// (see loadTools). It changes this process's limits for good.
		return m.parseChild(args[1:])
	case "-h", "-help", "--help":
		m.usage(m.Stdout)
		return nil
	case "-version", "--version":
		return m.printVersion(ctx, nil)
	}
	c, ok := lookup(args[0])
	if !ok {
		return usageErr("baton: unknown command %q (run 'baton help' for the list)", args[0])
	}
	return c.run(m, ctx, args[1:])
}

// parseChild runs `baton internal-parse`: one document or image parsed from
// stdin to stdout under the child's own resource limits (docparse.Main).
func (m *Main) parseChild(args []string) error {
	if len(args) > 0 {
		return usageErr("baton %s: unexpected argument %q", docparse.Subcommand, args[0])
	}
	if code := docparse.Main(m.Stdin, m.Stdout); code != 0 {
		return &exitError{code: code, err: errors.New("the parser child failed"), reported: true}
	}
	return nil
}

func (m *Main) usage(w io.Writer) {
	fmt.Fprintln(w, "Baton runs LLM agents from chat threads.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: baton <command> [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "'baton help COMMAND' (or 'baton COMMAND --help') shows a command's flags and examples.")
	fmt.Fprintln(w, "The configuration comes from --config FILE or BATON_CONFIG; see configs/baton.yaml.")
}

// commonFlags are the flags shared by commands that load a configuration.
type commonFlags struct {
	config  string
	dataDir string
	// The commands that run jobs (see runsJobs): what to do with
	// workspaces the store does not know.
	adopt, discard bool
}

// runsJobs reports whether cmd opens the store and the workspaces for
// jobs, and so takes --adopt-workspaces and --discard-workspaces.
func runsJobs(cmd string) bool {
	switch cmd {
	case "serve", "gateway", "worker", "chat", "run":
		return true
	}
	return false
}

// flagSet returns a flag set for cmd with --config (see newFlagSet: errors
// go to Stderr, help to Stdout). withDataDir adds --data-dir (SPEC §11: chat
// and run; tasks, which reads data_dir).
func (m *Main) flagSet(cmd string, cf *commonFlags, withDataDir bool) *flag.FlagSet {
	fs := m.newFlagSet(cmd)
	fs.StringVar(&cf.config, "config", "", "config `file` (default: $BATON_CONFIG, else built-in defaults)")
	if withDataDir {
		fs.StringVar(&cf.dataDir, "data-dir", "", "data `directory`, overriding data_dir and BATON_DATA_DIR")
	}
	if runsJobs(cmd) {
		fs.BoolVar(&cf.adopt, adoptFlag, false, "keep the workspaces in data_dir that this store does not know (its file is new or was replaced), as this store's")
		fs.BoolVar(&cf.discard, discardFlag, false, "move the workspaces in data_dir that this store does not know out of workspaces/ (to workspaces.discarded-TIME/)")
	}
	return fs
}

// parse parses args with fs, flags before, between or after the
// arguments (see parseArgs); a bad flag is a usage error already printed,
// -h or --help is a request for help (exit 0).
func parse(fs *flag.FlagSet, args []string) error {
	_, err := parseArgs(fs, args)
	return err
}

// setup loads and validates the configuration and builds the logger. Every
// failure is a usage error (exit 2) naming the key, file and line.
func (m *Main) setup(cmd string, cf commonFlags) error {
	if m.describe != nil {
		// A command asked to describe itself that did not stop at --help.
		return &exitError{code: exitOK, err: errors.New("baton " + cmd + ": described"), reported: true}
	}
	switch {
	case cf.adopt && cf.discard:
		return usageErr("baton %s: --%s and --%s exclude each other", cmd, adoptFlag, discardFlag)
	case cf.adopt:
		m.workspaces = workspace.Adopt
	case cf.discard:
		m.workspaces = workspace.Discard
	}
	cfg, origins, err := loadConfig(cf.config, m.Env)
	if err != nil {
		return configErr(cmd, err)
	}
	if cf.dataDir != "" {
		dir, err := filepath.Abs(cf.dataDir)
		if err != nil {
			return usageErr("baton %s: --data-dir: %v", cmd, err)
		}
		cfg.DataDir = dir
	}
	if err := cfg.Validate(); err != nil {
		return configErr(cmd, err)
	}
	logger, err := newLogger(cfg.Log, m.Stderr)
	if err != nil {
		return configErr(cmd, err)
	}
	if logger, err = m.traceLogs(cfg, logger); err != nil {
		return configErr(cmd, err)
	}
	m.Config, m.Logger, m.origins = cfg, logger, origins
	m.Logger.Debug("configuration loaded", "command", cmd, "data_dir", cfg.DataDir, "redis", cfg.Redis.enabled())
	return nil
}

// configErr formats a configuration error, one problem per line.
func configErr(cmd string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) == 1 {
		return &exitError{code: exitUsage, err: fmt.Errorf("baton %s: %w", cmd, err)}
	}
	return &exitError{code: exitUsage, err: fmt.Errorf("baton %s: invalid configuration:\n  %s", cmd, strings.Join(lines, "\n  "))}
}

// notYet reports a command whose machinery is not part of this build.
func notYet(cmd string) error {
	return &exitError{code: exitInternal, err: fmt.Errorf("baton %s: not available yet", cmd)}
}

func noArgs(cmd string, fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usageErr("baton %s: unexpected argument %q", cmd, fs.Arg(0))
	}
	return nil
}

// configOnly parses a command that takes --config and no arguments, and
// loads the configuration.
func (m *Main) configOnly(cmd string, args []string) error {
	var cf commonFlags
	fs := m.flagSet(cmd, &cf, false)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(cmd, fs); err != nil {
		return err
	}
	return m.setup(cmd, cf)
}

// requireRedis refuses to start a command that only works across processes
// without a Redis queue.
func (m *Main) requireRedis(cmd string) error {
	if m.Config.Redis.enabled() {
		return nil
	}
	return configErr(cmd, &ConfigError{Key: "redis.url", Msg: fmt.Sprintf("must be set: baton %s shares its queue through Redis (set redis.url or REDIS_URL, or redis.cluster_addrs; baton serve runs without Redis)", cmd)})
}

// requireKey refuses to start a command that calls the model when
// llm.api_key is empty and the endpoint is one that needs a key
// (llm.NeedsKey: OpenAI's own). Local servers (Ollama, llama.cpp, vLLM
// without auth) take an empty key; another endpoint that wants one says
// so with a 401 at the first request, which the job reports naming the
// same setting. The gateway never calls the model and needs no key.
func (m *Main) requireKey(cmd string) error {
	c := m.Config.LLM
	if c.APIKey != "" || !llm.NeedsKey(c.BaseURL) {
		return nil
	}
	return configErr(cmd, &ConfigError{Key: "llm.api_key", Msg: fmt.Sprintf(
		"is empty (set OPENAI_API_KEY): %s needs an API key; a local model server without keys goes in llm.base_url / OPENAI_BASE_URL", c.BaseURL)})
}

func (m *Main) serve(ctx context.Context, args []string) error {
	if err := m.configOnly("serve", args); err != nil {
		return err
	}
	if err := m.requireKey("serve"); err != nil {
		return err
	}
	return m.serveAll(ctx, "serve", true)
}

func (m *Main) gateway(ctx context.Context, args []string) error {
	if err := m.configOnly("gateway", args); err != nil {
		return err
	}
	if err := m.requireRedis("gateway"); err != nil {
		return err
	}
	return m.serveAll(ctx, "gateway", false)
}

func (m *Main) worker(ctx context.Context, args []string) error {
	if err := m.configOnly("worker", args); err != nil {
		return err
	}
	if err := m.requireRedis("worker"); err != nil {
		return err
	}
	if err := m.requireKey("worker"); err != nil {
		return err
	}
	sys, err := newSystem(ctx, m.Config, m.Logger, systemOptions{role: "worker", converse: true, workspaces: m.workspaces})
	if err != nil {
		return m.systemErr("worker", err)
	}
	defer sys.Close()
	m.startChecks("worker", sys, nil)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ops, err := m.startWorkerOps(runCtx, sys, stopRun)
	if err != nil {
		return err
	}
	defer ops.stop()
	// A worker has nothing to do without its queue: it waits for Redis.
	if _, err := sys.connectQueue(runCtx); err != nil {
		if fatal := ops.fatal(); fatal != nil {
			return fatal
		}
		return err
	}
	m.Logger.Info("worker started", "concurrency", m.Config.Workers.Concurrency)
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		_ = sys.rec.Run(runCtx)
	}()
	err = sys.pool.Run(runCtx) // until SIGTERM/SIGINT, then a graceful shutdown
	<-recDone
	ops.stop()
	m.Logger.Info("worker stopped")
	if fatal := ops.fatal(); fatal != nil {
		return fatal
	}
	return err
}

// jobFlags are the job options of chat and run.
type jobFlags struct {
	piece string
	task  int64 // run only; 0: a new task
	// decision and reason (run only, with task): the verdict on the
	// task's call waiting for approval, "" for none.
	decision core.Verdict
	reason   string
	// verbose keeps the log on stderr instead of data_dir/logs/.
	verbose bool
}

func (m *Main) chat(ctx context.Context, args []string) error {
	var cf commonFlags
	fs := m.flagSet("chat", &cf, true)
	var jf jobFlags
	fs.StringVar(&jf.piece, "piece", "", "`piece` for new jobs (default: default_piece)")
	fs.BoolVar(&jf.verbose, "verbose", false, "show the log in the conversation (default: in data_dir/logs/baton-chat.log)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs("chat", fs); err != nil {
		return err
	}
	if err := m.setup("chat", cf); err != nil {
		return err
	}
	if err := m.requireKey("chat"); err != nil {
		return err
	}
	if jf.piece != "" {
		m.Config.DefaultPiece = jf.piece
	}
	return m.chatSession(ctx, jf)
}

func (m *Main) runJob(ctx context.Context, args []string) error {
	var cf commonFlags
	fs := m.flagSet("run", &cf, true)
	var jf jobFlags
	fs.StringVar(&jf.piece, "piece", "", "`piece` to run (default: default_piece)")
	fs.BoolVar(&jf.verbose, "verbose", false, "show the log on stderr (default: in data_dir/logs/baton-run.log)")
	fs.Int64Var(&jf.task, "task", 0, "continue task `N` (for example to answer its question)")
	approve := fs.Bool("approve", false, "with --task N: approve the task's call waiting for approval, and run the job on")
	deny := fs.Bool("deny", false, "with --task N: deny the task's call waiting for approval (the agent is told), and run the job on")
	fs.StringVar(&jf.reason, "reason", "", "with --deny: the `reason` the agent is told")
	p, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if p.runs > 1 {
		// `baton run write a --piece research poem`: is "poem" part of
		// the instruction? Refused rather than guessed.
		return usageErr("baton run: flags split the instruction (%s); quote the instruction, and put -- before it if it starts with -", quoteAll(p.args))
	}
	instruction := strings.TrimSpace(strings.Join(fs.Args(), " "))
	switch {
	case *approve && *deny:
		return usageErr("baton run: --approve and --deny exclude each other")
	case *approve || *deny:
		jf.decision = core.VerdictApprove
		if *deny {
			jf.decision = core.VerdictDeny
		}
		if jf.task == 0 {
			return usageErr("baton run: --approve and --deny decide a task's call waiting for approval: name the task with --task N")
		}
		if instruction != "" {
			return usageErr("baton run: --approve and --deny take no instruction, got %q", instruction)
		}
	case instruction == "":
		fs.Usage()
		return usageErr("baton run: an instruction is required")
	}
	if jf.reason != "" && !*deny {
		return usageErr("baton run: --reason goes with --deny")
	}
	if jf.task < 0 {
		return usageErr("baton run: --task must be a task number, got %d", jf.task)
	}
	if err := m.setup("run", cf); err != nil {
		return err
	}
	if err := m.requireKey("run"); err != nil {
		return err
	}
	return m.run(ctx, jf, instruction)
}

func (m *Main) pieces(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErr("baton pieces: a subcommand is required: validate [FILES] or list")
	}
	sub, rest := args[0], args[1:]
	if wantsHelp(args[:1]) {
		// Both subcommands take the same flags.
		var cf commonFlags
		m.showHelp("pieces", namedFlags{fs: m.flagSet("pieces", &cf, false)})
		return &exitError{code: exitOK, err: flag.ErrHelp, reported: true}
	}
	var files []string
	switch sub {
	case "validate":
		var cf commonFlags
		fs := m.flagSet("pieces", &cf, false)
		if err := parse(fs, rest); err != nil {
			return err
		}
		if err := m.setup("pieces", cf); err != nil {
			return err
		}
		files = fs.Args()
	case "list":
		if err := m.configOnly("pieces", rest); err != nil {
			return err
		}
	default:
		return usageErr("baton pieces: unknown subcommand %q: want validate or list", sub)
	}
	// A broken pieces_dir is told before the sandbox's probe creates
	// anything under data_dir.
	if err := checkPieces(m.Config); err != nil {
		return m.piecesErr(err)
	}
	sb, err := openSandbox(ctx, m.Config, m.Logger)
	if err != nil {
		return err
	}
	set, err := loadTools(m.Config, sb, m.Logger)
	if err != nil {
		return err
	}
	lib, err := loadPieces(m.Config, set, sb)
	if err != nil {
		return m.piecesErr(err)
	}
	if sub == "list" {
		for _, name := range lib.Names() {
			p, _ := lib.Lookup(name)
			fmt.Fprintf(m.Stdout, "%-24s %s\n", name, p.Description.For(m.Config.Locale))
		}
		return nil
	}
	if errs := lib.Validate(files); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(m.Stderr, e)
		}
		return &exitError{code: exitUsage, err: fmt.Errorf("baton pieces: %d problems", len(errs)), reported: true}
	}
	n := len(files)
	if n == 0 {
		n = len(lib.Names())
	}
	fmt.Fprintf(m.Stdout, "baton: %d pieces valid\n", n)
	return nil
}

func (m *Main) migrate(ctx context.Context, args []string) error {
	if err := m.configOnly("migrate", args); err != nil {
		return err
	}
	st, err := openStore(ctx, m.Config, m.Logger)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "baton: the store %s is up to date\n", storeName(m.Config))
	return nil
}

// systemErr turns a configuration problem found while building the system
// into a usage error (exit 2).
func (m *Main) systemErr(cmd string, err error) error {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return configErr(cmd, err)
	}
	var pe *piecesError
	if errors.As(err, &pe) {
		return piecesProblem(cmd, pe)
	}
	if errors.Is(err, workspace.ErrForeign) {
		return usageErr("baton %s: %v\nThe store is new or its file was replaced, and these workspaces may hold another person's files. Start once with --%s to keep them for this store, or with --%s to move them out of the way.",
			cmd, err, adoptFlag, discardFlag)
	}
	return err
}

func (m *Main) printVersion(ctx context.Context, args []string) error {
	fs := m.newFlagSet("version")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs("version", fs); err != nil {
		return err
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	fmt.Fprint(m.Stdout, versionText(m.Version, bi))
	return nil
}

// help prints the list of commands, or a command's help: `baton help
// COMMAND` is `baton COMMAND --help`, which stops at its flags.
func (m *Main) help(ctx context.Context, args []string) error {
	fs := m.newFlagSet("help")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
		m.usage(m.Stdout)
		return nil
	case 1:
		c, ok := lookup(fs.Arg(0))
		if !ok {
			return usageErr("baton help: unknown command %q (run 'baton help' for the list)", fs.Arg(0))
		}
		if c.name == "help" {
			m.showHelp("help", namedFlags{fs: fs})
			return nil
		}
		return c.run(m, ctx, []string{"--help"})
	default:
		return usageErr("baton help: one command at a time, got %q", fs.Args())
	}
}

// quoteAll quotes each argument as a shell would need.
func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer // guarded by mu
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
