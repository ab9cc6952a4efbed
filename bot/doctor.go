package main

// baton doctor: every check of a setup, one line each with what to change,
// and its quick form at the start of serve, gateway, worker and run. The
// checks of the model endpoint are in doctor_model.go, those of Slack and
// Discord in doctor_chat.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"

	"github.com/baton-bot/baton/core/sandbox"
)

// checkStatus is the outcome of one check.
type checkStatus string

const (
	statusOK   checkStatus = "ok"
	statusWarn checkStatus = "warn" // works, but worse than it could: never fails doctor
	statusFail checkStatus = "fail" // something Baton needs does not work
	statusSkip checkStatus = "skip" // not applicable to this configuration
)

// check is one line of baton doctor. Detail says what was found and Fix
// what to change, each a plain sentence; neither ever carries a secret
// (Secret values are shown only as "[redacted]", and the checks quote no
// server's answer body).
type check struct {
	Name   string      `json:"name"`
	Status checkStatus `json:"status"`
	Detail string      `json:"detail"`
	Fix    string      `json:"fix"` // "" when there is nothing to change
}

func passed(name, detail string) check { return check{Name: name, Status: statusOK, Detail: detail} }
func skipped(name, detail string) check {
	return check{Name: name, Status: statusSkip, Detail: detail}
}
func warning(name, detail, fix string) check {
	return check{Name: name, Status: statusWarn, Detail: detail, Fix: fix}
}
func failure(name, detail, fix string) check {
	return check{Name: name, Status: statusFail, Detail: detail, Fix: fix}
}

// symbol is the check's mark at the start of its line.
func (c check) symbol() string {
	switch c.Status {
	case statusOK:
		return "✓"
	case statusWarn:
		return "!"
	case statusFail:
		return "✗"
	}
	return "-"
}

// count returns how many checks failed and how many warned.
func count(checks []check) (failed, warned int) {
	for _, c := range checks {
		switch c.Status {
		case statusFail:
			failed++
		case statusWarn:
			warned++
		}
	}
	return failed, warned
}

// doctorTimeout bounds each network check.
const doctorTimeout = 15 * time.Second

// doctor runs the checks of one configuration. Its zero value is not
// usable: build it with newDoctor.
type doctor struct {
	cfg Config
	log *slog.Logger // for the components a check builds: discarded, the checks speak for them
	hc  *http.Client // for the model endpoint, Slack and Discord
}

func newDoctor(cfg Config) *doctor {
	return &doctor{cfg: cfg, log: slog.New(slog.DiscardHandler), hc: probeClient()}
}

// probeClient is the HTTP client of requests that check a service: each
// bounded by doctorTimeout.
func probeClient() *http.Client { return &http.Client{Timeout: doctorTimeout} }

func (m *Main) doctor(ctx context.Context, args []string) error {
	var cf commonFlags
	fs := m.flagSet("doctor", &cf, false)
	asJSON := fs.Bool("json", false, "print one JSON document (ok, and each check's name, status, detail and fix) instead of lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs("doctor", fs); err != nil {
		return err
	}
	return m.runDoctor(ctx, cf.config, m.Env, *asJSON)
}

// runDoctor runs every check of the configuration at path (with env) and
// prints them to Stdout; the error is nil when nothing failed (warnings do
// not fail), else an exit-1 error already reported.
func (m *Main) runDoctor(ctx context.Context, path string, env func(string) string, asJSON bool) error {
	checks := diagnose(ctx, path, env)
	failed, warned := count(checks)
	if asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			OK     bool    `json:"ok"`
			Checks []check `json:"checks"`
		}{failed == 0, checks}); err != nil {
			return err
		}
	} else {
		printChecks(m.Stdout, checks)
		fmt.Fprintln(m.Stdout, doctorSummary(failed, warned))
	}
	if failed > 0 {
		return &exitError{code: exitInternal, err: errors.New(doctorSummary(failed, warned)), reported: true}
	}
	return nil
}

func doctorSummary(failed, warned int) string {
	w := "no warnings"
	if warned > 0 {
		w = plural(warned, "warning", "warnings")
	}
	if failed == 0 {
		return fmt.Sprintf("baton doctor: everything Baton needs works (%s)", w)
	}
	return fmt.Sprintf("baton doctor: %s to fix (%s)", plural(failed, "problem", "problems"), w)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// printChecks writes one line per check: its mark, its name, what was
// found and, after →, what to change.
func printChecks(w io.Writer, checks []check) {
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	for _, c := range checks {
		line := fmt.Sprintf("%s %-*s  %s", c.symbol(), width, c.Name, c.Detail)
		if c.Fix != "" {
			line += " → " + c.Fix
		}
		fmt.Fprintln(w, line)
	}
}

// diagnose runs every check: the configuration first, and the others only
// when it could be loaded. A configuration that loads but does not pass
// Validate fails its check and the others still run on it.
func diagnose(ctx context.Context, path string, env func(string) string) []check {
	cfg, checks, ok := configCheck(path, env)
	if !ok {
		return checks
	}
	d := newDoctor(cfg)
	checks = append(checks, d.dataDir(), d.store(ctx), d.queue(ctx))
	checks = append(checks, d.model(ctx)...)
	checks = append(checks, d.sandbox(ctx)...)
	checks = append(checks, d.slack(ctx)...)
	checks = append(checks, d.discord(ctx)...)
	return checks
}

// configCheck loads the configuration as every command does. ok is false
// when it could not be loaded at all.
func configCheck(path string, env func(string) string) (cfg Config, checks []check, ok bool) {
	const name = "config"
	if path == "" {
		path = env("BATON_CONFIG")
	}
	cfg, err := LoadConfig(path, env)
	if err != nil {
		return cfg, []check{failure(name, oneLine(err), "fix what is named (configs/baton.yaml lists every key with its default)")}, false
	}
	where := path + " is valid"
	if path == "" {
		where = "no config file (--config or BATON_CONFIG): the built-in defaults and the environment"
	}
	if err := cfg.Validate(); err != nil {
		return cfg, []check{failure(name, "invalid configuration: "+oneLine(err), "fix the keys named (in the file, or in the environment variables they name)")}, true
	}
	if path == "" {
		if _, err := os.Stat("baton.yaml"); err == nil {
			return cfg, []check{warning(name, "no config file given, so the built-in defaults and the environment; ./baton.yaml is here, but Baton reads a config file only when told",
				"pass --config baton.yaml, or set BATON_CONFIG=baton.yaml")}, true
		}
	}
	return cfg, []check{passed(name, where)}, true
}

// oneLine joins a multi-line error's lines with "; ".
func oneLine(err error) string {
	return strings.Join(strings.Split(strings.TrimSpace(err.Error()), "\n"), "; ")
}

// dataDir checks that data_dir can be created and written, and that it
// has workspaces.min_free_bytes free.
func (d *doctor) dataDir() check {
	const name = "data_dir"
	dir := d.cfg.DataDir
	fix := "set data_dir (or BATON_DATA_DIR) to a directory Baton's user can write, or give that user this one"
	// 0755, as the workspaces below it: when Baton runs as root, the
	// sandbox's user must be able to enter it.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return failure(name, fmt.Sprintf("cannot create %s: %v", dir, unwrapPath(err)), fix)
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err == nil {
		_, err = f.Write([]byte("x"))
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}
	if err != nil {
		return failure(name, fmt.Sprintf("%s is not writable: %v", dir, unwrapPath(err)), fix)
	}
	free, err := freeBytes(dir)
	if err != nil {
		return warning(name, fmt.Sprintf("%s is writable, but its free space is unknown: %v", dir, err), "check the file system of data_dir")
	}
	floor := d.cfg.Workspaces.MinFreeBytes
	if floor > 0 && free < floor {
		return failure(name, fmt.Sprintf("%s has %s free, below workspaces.min_free_bytes (%s): tools may not write there and /readyz answers 503",
			dir, bytesText(free), bytesText(floor)), "free space on that file system, or lower workspaces.min_free_bytes")
	}
	detail := fmt.Sprintf("%s is writable, %s free", dir, bytesText(free))
	if floor > 0 {
		detail += fmt.Sprintf(" (workspaces.min_free_bytes: %s)", bytesText(floor))
	}
	return passed(name, detail)
}

func bytesText(n int64) string { return humanize.Bytes(uint64(max(n, 0))) }

// freeBytes is the space available to unprivileged users on dir's file
// system, as the workspaces' floor counts it.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// unwrapPath drops the path of a *fs.PathError, which the message names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// store opens the store as every command does (applying pending
// migrations) and makes its smallest write.
func (d *doctor) store(ctx context.Context) check {
	const name = "store"
	path := storeName(d.cfg)
	st, err := openStore(ctx, d.cfg, d.log)
	if err != nil {
		if storePath(d.cfg) == "" {
			return failure(name, oneLine(err), "check that PostgreSQL answers at database.url (DATABASE_URL), its user, password and database")
		}
		return failure(name, oneLine(err), "check data_dir's permissions and free space; a corrupt baton.db restores from a backup")
	}
	defer st.Close()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := st.Heartbeat(hctx); err != nil {
		return failure(name, fmt.Sprintf("%s opens but cannot write: %s", path, oneLine(err)), "check the disk (full? read-only?) and that no other program locks the file")
	}
	return passed(name, path+" opens, its migrations are current, and it takes writes")
}

// queue checks Redis when redis.url is set: it answers, and never evicts
// keys.
func (d *doctor) queue(ctx context.Context) check {
	const name = "queue"
	if !d.cfg.Redis.enabled() {
		return passed(name, "the in-process queue (redis.url is empty): baton serve runs alone; gateway and worker need Redis")
	}
	target, err := parseRedis(d.cfg.Redis)
	if err != nil {
		return failure(name, err.Error(), "set redis.url (or REDIS_URL) as redis://[:password@]host:port/db or redis+sentinel://host:port/master, or redis.cluster_addrs")
	}
	routeRedisLogs(d.log)
	client := target.client(redisTuning{MaxRetries: -1, DialerRetries: 1, DialTimeout: 3 * time.Second, ReadTimeout: 3 * time.Second})
	defer client.Close()
	addr := target.name
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Ping(cctx).Err(); err != nil {
		return failure(name, fmt.Sprintf("Redis at %s does not answer: %v", addr, err), "start Redis, or set redis.url (REDIS_URL) to where it listens")
	}
	policy, err := client.ConfigGet(cctx, "maxmemory-policy").Result()
	switch {
	case err != nil:
		return warning(name, fmt.Sprintf("Redis at %s answers, but its maxmemory-policy cannot be read (%v)", addr, err), "make sure it is noeviction: a Redis that evicts keys can lose jobs")
	case policy["maxmemory-policy"] != "noeviction":
		return warning(name, fmt.Sprintf("Redis at %s answers, but its maxmemory-policy is %s: under memory pressure it may evict the queue's keys and lose jobs", addr, policy["maxmemory-policy"]),
			"run Redis with --maxmemory-policy noeviction (or CONFIG SET maxmemory-policy noeviction)")
	}
	return passed(name, fmt.Sprintf("Redis at %s answers; maxmemory-policy noeviction", addr))
}

// sandbox probes the sandbox of Bash and git as start-up does, and checks
// that the sandbox's user can reach data_dir when Baton runs as root.
func (d *doctor) sandbox(ctx context.Context) []check {
	if d.cfg.Tools.Bash.Sandbox == sandbox.None {
		return []check{sandboxState(d.cfg, nil, nil)}
	}
	reach := d.reach()
	sb, err := openSandbox(ctx, d.cfg, d.log)
	state := sandboxState(d.cfg, sb, err)
	if reach.Status == statusWarn || reach.Status == statusFail {
		// The probe failed for that reason: say it once, there.
		state.Detail, state.Fix = "bubblewrap cannot reach data_dir as the sandbox's user, so Bash is disabled", "see sandbox.data_dir"
		if err != nil {
			state.Detail = "tools.bash.sandbox is bwrap and bubblewrap cannot reach data_dir as the sandbox's user, so Baton will not start"
		}
	}
	out := []check{state}
	if reach.Status != statusSkip {
		out = append(out, reach)
	}
	if err == nil && d.cfg.Tools.Bash.Network == "allow_pieces" {
		if nerr := sb.Network(); nerr != nil {
			out = append(out, warning("sandbox.network", "tools.bash.network is allow_pieces, but the sandbox cannot give the network here: "+nerr.Error()+"; movements with network: true are refused",
				"install pasta (passt) and iproute2, or set tools.bash.network: deny"))
		} else {
			out = append(out, passed("sandbox.network", "movements with network: true get user-mode networking (pasta)"))
		}
	}
	if d.cfg.Egress.enabled() {
		out = append(out, egressCheck(d.cfg, sb, err))
	}
	return out
}

// sandboxState describes the sandbox sb that openSandbox built (or its
// error err): what Bash will do, and how to make it work where it does
// not. sb is nil under tools.bash.sandbox: none.
func sandboxState(cfg Config, sb *sandbox.Sandbox, err error) check {
	const name = "sandbox"
	mode := cfg.Tools.Bash.Sandbox
	switch {
	case mode == sandbox.None:
		return warning(name, "tools.bash.sandbox is none: Bash and git run on the host, under resource limits only, and can read and write whatever Baton can",
			"set tools.bash.sandbox: auto where bubblewrap works")
	case err != nil:
		return failure(name, "tools.bash.sandbox is bwrap and bubblewrap does not work here, so Baton will not start: "+clip(oneLine(err), 400), sandboxFix(err.Error()))
	}
	if ok, why := sb.Available(); !ok {
		return warning(name, "bubblewrap does not work here, so Bash is disabled (the agent is told so; tools.bash.sandbox: auto): "+clip(why, 400), sandboxFix(why))
	}
	uid, _, differs := sb.Owner()
	detail := "bubblewrap works: Bash and git run sandboxed"
	if differs {
		detail += fmt.Sprintf(" as uid %d", uid)
	}
	return passed(name, detail)
}

// sandboxFix says how to make bubblewrap work, for the probe's reason why.
func sandboxFix(why string) string {
	switch {
	case runtime.GOOS != "linux":
		return "bubblewrap is Linux-only: run Baton in Docker (docker compose up, with the security_opt lines of docker-compose.yml) for a sandboxed Bash, " +
			"or, on a machine you trust, set tools.bash.sandbox: none (commands then run as Baton's user, unisolated)"
	case strings.Contains(why, "bubblewrap not found"):
		return "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap, apk add bubblewrap)"
	case strings.Contains(why, "prlimit"):
		return "install util-linux (it has prlimit) in /usr/bin"
	case strings.Contains(why, "cannot reach the workspaces"):
		return "see sandbox.data_dir"
	case inContainer():
		return "in Docker, give the baton service security_opt: [seccomp=unconfined, systempaths=unconfined, apparmor=unconfined] (see docker-compose.yml), " +
			"and allow unprivileged user namespaces on the host (sysctl kernel.unprivileged_userns_clone=1; Ubuntu 24.04: kernel.apparmor_restrict_unprivileged_userns=0)"
	}
	return "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; Ubuntu 24.04: sysctl kernel.apparmor_restrict_unprivileged_userns=0), " +
		"or set tools.bash.sandbox: none on a machine you trust"
}

// inContainer reports whether Baton runs in a Docker or Podman container.
func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}

// reach checks that the sandbox's user can reach data_dir when Baton runs
// as root: bubblewrap runs as that user then, and a data_dir under /root
// (mode 0700) leaves Bash unavailable.
func (d *doctor) reach() check {
	const name = "sandbox.data_dir"
	sc := d.cfg.Tools.Sandbox
	if os.Geteuid() != 0 || d.cfg.Tools.Bash.Sandbox == sandbox.None {
		return skipped(name, "Baton does not run as root: the sandbox runs as Baton's own user")
	}
	err := sandbox.Reachable(d.cfg.DataDir, sc.UID, sc.GID)
	if err == nil {
		return passed(name, fmt.Sprintf("Baton runs as root and the sandbox as uid %d, which can reach %s", sc.UID, d.cfg.DataDir))
	}
	// Reachable says what it found, then how to fix it.
	found, fix, ok := strings.Cut(err.Error(), "; ")
	if !ok {
		fix = "move data_dir to a directory every user can enter (e.g. /var/lib/baton), make its parents searchable (chmod o+x), or set tools.sandbox.uid and gid to a user that can reach it"
	}
	detail := fmt.Sprintf("Baton runs as root, so bubblewrap runs as uid %d:%d, and Bash is unavailable: %s", sc.UID, sc.GID, found)
	if under(d.cfg.DataDir, "/root") {
		detail += " (a data_dir under /root is the usual cause: /root is private to root)"
		fix = "move data_dir out of /root (e.g. data_dir: /var/lib/baton, or BATON_DATA_DIR), or set tools.sandbox.uid and gid to a user that can reach it"
	}
	if d.cfg.Tools.Bash.Sandbox == sandbox.Bwrap {
		return failure(name, detail, fix)
	}
	return warning(name, detail, fix)
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// shownURL is raw as checks show it: scheme, host, port and path, without
// userinfo, query or fragment (where proxies put credentials).
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return strings.TrimSuffix(u.String(), "/")
}

// startChecks is doctor's quick form at the start of serve, gateway,
// worker and run: the cheap checks only (data_dir, the sandbox as sys
// built it, its reach of data_dir, the token prefixes), never the network
// ones. What makes start impossible has already failed it; each problem
// found here is logged once as a warning with its fix.
// Where the log goes to a file (baton run), screen, when not nil, gets the
// same problems as lines, so that the person at the terminal sees them.
func (m *Main) startChecks(cmd string, sys *system, screen io.Writer) {
	d := newDoctor(m.Config)
	checks := []check{d.dataDir()}
	if m.Config.Tools.Bash.Sandbox != sandbox.None {
		// Under none the sandbox has said so itself.
		checks = append(checks, sandboxState(m.Config, sys.sandbox, nil), d.reach())
	}
	checks = append(checks, tokenChecks(m.Config)...)
	n := 0
	for _, c := range checks {
		if c.Status == statusWarn || c.Status == statusFail {
			n++
			m.Logger.Warn(c.Detail, "check", c.Name, "fix", c.Fix)
			if screen != nil {
				fmt.Fprintf(screen, "baton: ! %s → %s\n", c.Detail, c.Fix)
			}
		}
	}
	if n > 0 {
		summary := fmt.Sprintf("baton %s: %s at start; baton doctor checks everything, the model and the chat platforms too", cmd, plural(n, "problem", "problems"))
		m.Logger.Warn(summary)
		if screen != nil {
			fmt.Fprintln(screen, summary)
		}
	}
}
