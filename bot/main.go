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
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/docparse"
	"github.com/baton-bot/baton/core/workspace"
)

// version is set at build time: go build -ldflags "-X main.version=1.2.3".
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

	// workspaces is what --adopt-workspaces or --discard-workspaces said
	// to do with workspaces the store does not know (see claimWorkspaces).
	workspaces workspace.Policy
	// listener opens the listener of a config key (http.addr, admin.addr);
	// nil: listen. Tests hand in listeners that fail.
	listener func(key, addr string) (net.Listener, error)
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
// error, and 1 for anything else.
func ExitCode(err error) int {
	var ee *exitError
	var ce *ConfigError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &ce):
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
		{"chat", "[--config FILE] [--data-dir DIR] [--piece P] [--adopt-workspaces|--discard-workspaces]", "talk to Baton in an interactive console thread", (*Main).chat},
		{"run", `[--config FILE] [--data-dir DIR] [--piece P] [--task N] [--adopt-workspaces|--discard-workspaces] ("instruction" | --approve | --deny [--reason TEXT])`, "run one job in this process; the answer goes to stdout (--task N --approve|--deny: decide its call waiting for approval)", (*Main).runJob},
		{"pieces", "validate [--config FILE] [FILES] | list [--config FILE]", "check piece files, or list the pieces", (*Main).pieces},
		{"migrate", "[--config FILE]", "apply the database migrations", (*Main).migrate},
		{"version", "", "print the version", (*Main).printVersion},
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
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
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

// flagSet returns a flag set for cmd that prints errors and usage to Stderr.
// withDataDir adds --data-dir (SPEC §11: chat and run).
func (m *Main) flagSet(cmd string, cf *commonFlags, withDataDir bool) *flag.FlagSet {
	fs := flag.NewFlagSet("baton "+cmd, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.StringVar(&cf.config, "config", "", "config `file` (default: $BATON_CONFIG, else built-in defaults)")
	if withDataDir {
		fs.StringVar(&cf.dataDir, "data-dir", "", "data `directory`, overriding data_dir and BATON_DATA_DIR")
	}
	if runsJobs(cmd) {
		fs.BoolVar(&cf.adopt, adoptFlag, false, "keep the workspaces in data_dir that this store does not know (its file is new or was replaced), as this store's")
		fs.BoolVar(&cf.discard, discardFlag, false, "move the workspaces in data_dir that this store does not know out of workspaces/ (to workspaces.discarded-TIME/)")
	}
	fs.Usage = func() {
		c, _ := lookup(cmd)
		fmt.Fprintf(fs.Output(), "Usage: baton %s %s\n\n%s\n\nFlags:\n", cmd, c.args, c.summary)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs; a bad flag is a usage error already printed,
// -h is a request for help (exit 0).
func parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return &exitError{code: exitOK, err: err, reported: true}
	default:
		return &exitError{code: exitUsage, err: err, reported: true}
	}
}

// setup loads and validates the configuration and builds the logger. Every
// failure is a usage error (exit 2) naming the key, file and line.
func (m *Main) setup(cmd string, cf commonFlags) error {
	switch {
	case cf.adopt && cf.discard:
		return usageErr("baton %s: --%s and --%s exclude each other", cmd, adoptFlag, discardFlag)
	case cf.adopt:
		m.workspaces = workspace.Adopt
	case cf.discard:
		m.workspaces = workspace.Discard
	}
	cfg, err := LoadConfig(cf.config, m.Env)
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
	m.Config, m.Logger = cfg, logger
	m.Logger.Debug("configuration loaded", "command", cmd, "data_dir", cfg.DataDir, "redis", cfg.Redis.URL != "")
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
	if m.Config.Redis.URL != "" {
		return nil
	}
	return configErr(cmd, &ConfigError{Key: "redis.url", Msg: fmt.Sprintf("must be set: baton %s shares its queue through Redis (set redis.url or REDIS_URL; baton serve runs without Redis)", cmd)})
}

func (m *Main) serve(ctx context.Context, args []string) error {
	if err := m.configOnly("serve", args); err != nil {
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
	sys, err := newSystem(ctx, m.Config, m.Logger, systemOptions{converse: true, workspaces: m.workspaces})
	if err != nil {
		return m.systemErr("worker", err)
	}
	defer sys.Close()
	// A worker has nothing to do without its queue: it waits for Redis.
	if _, err := sys.connectQueue(ctx); err != nil {
		return err
	}
	m.Logger.Info("worker started", "concurrency", m.Config.Workers.Concurrency)
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		_ = sys.rec.Run(ctx)
	}()
	err = sys.pool.Run(ctx) // until SIGTERM/SIGINT, then a graceful shutdown
	<-recDone
	m.Logger.Info("worker stopped")
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
	if err := parse(fs, args); err != nil {
		return err
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
	return m.run(ctx, jf, instruction)
}

func (m *Main) pieces(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErr("baton pieces: a subcommand is required: validate [FILES] or list")
	}
	sub, rest := args[0], args[1:]
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
		// Every problem of the built-in pieces and pieces_dir, one a line.
		fmt.Fprintln(m.Stderr, strings.TrimPrefix(err.Error(), "pieces: "))
		return &exitError{code: exitInternal, err: errors.New("baton pieces: invalid pieces"), reported: true}
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
		return &exitError{code: exitInternal, err: fmt.Errorf("baton pieces: %d problems", len(errs)), reported: true}
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
	fmt.Fprintf(m.Stdout, "baton: the store %s is up to date\n", storePath(m.Config))
	return nil
}

// systemErr turns a configuration problem found while building the system
// into a usage error (exit 2).
func (m *Main) systemErr(cmd string, err error) error {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return configErr(cmd, err)
	}
	if errors.Is(err, workspace.ErrForeign) {
		return usageErr("baton %s: %v\nThe store is new or its file was replaced, and these workspaces may hold another person's files. Start once with --%s to keep them for this store, or with --%s to move them out of the way.",
			cmd, err, adoptFlag, discardFlag)
	}
	return err
}

func (m *Main) printVersion(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErr("baton version: unexpected argument %q", args[0])
	}
	fmt.Fprintf(m.Stdout, "baton %s %s %s/%s\n", m.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

func (m *Main) help(ctx context.Context, args []string) error {
	switch len(args) {
	case 0:
		m.usage(m.Stdout)
		return nil
	case 1:
		c, ok := lookup(args[0])
		if !ok {
			return usageErr("baton help: unknown command %q", args[0])
		}
		fmt.Fprintf(m.Stdout, "Usage: baton %s %s\n\n%s\n", c.name, c.args, c.summary)
		return nil
	default:
		return usageErr("baton help: too many arguments")
	}
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
