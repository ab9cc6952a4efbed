// Package sandbox builds the one sandbox every command Baton runs over an
// agent-written workspace goes through: Bash, git and later the document
// parsers and the egress bridge (SPEC §16).
//
// A Sandbox is built once at start with New, which probes it: it runs the
// real sandbox and checks from inside that the process has no
// capabilities, runs as an unprivileged uid, cannot remount the system,
// write /usr or /proc/sys, or read /etc/shadow, and carries the configured
// resource limits. Command then turns "run argv in dir with these binds,
// this environment, network yes or no" into an *exec.Cmd.
//
// Inside, a command sees the system directories read-only, a private /tmp,
// /dev and /proc, and only the binds it was given; it runs in new user,
// PID, IPC, UTS, cgroup and network namespaces, in its own session, with
// no capabilities, no_new_privs, no further user namespaces, and rlimits
// on processes, address space, open files, file size and (when asked) CPU
// time. When Baton runs as root, bubblewrap itself is started as the
// sandbox's unprivileged uid/gid (Config.UID, GID), so that root inside
// the user namespace is never root on the host; the directories a command
// may write must then belong to that user (see Own).
//
// Network, when granted, is a namespace of its own with user-mode
// networking (pasta): the host's loopback, its own addresses and private
// ranges are unreachable.
//
// A command given the egress proxy instead (Spec.Egress) keeps a network
// namespace with nothing but its loopback, where the bridge (the baton
// binary, handed in read-only as descriptor 3) listens and relays to the
// proxy's socket bound in; the proxy variables point at it. See
// core/egress.
package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/baton-bot/baton/core/egress"
)

// Modes of Config.Mode.
const (
	// Auto uses bubblewrap when the probe passes, else the sandbox is
	// unavailable (Available says why) and New does not fail.
	Auto = "auto"
	// Bwrap requires bubblewrap: New fails when the probe does not pass.
	Bwrap = "bwrap"
	// None runs commands on the host, only under the rlimits: only when an
	// operator writes it.
	None = "none"
)

// NobodyID is the default sandbox uid and gid (nobody/nogroup).
const NobodyID = 65534

// WaitDelay bounds how long Wait waits for a command's output once it has
// been killed or has exited.
const WaitDelay = 2 * time.Second

// ErrUnavailable is returned by Command when the sandbox does not work on
// this host; the error's text says why.
var ErrUnavailable = errors.New("the sandbox is unavailable")

// Limits are per-command resource limits. A zero field leaves that limit
// as Baton's own.
type Limits struct {
	Processes         int   // RLIMIT_NPROC: processes and threads, counted per sandbox
	AddressSpaceBytes int64 // RLIMIT_AS of each process
	OpenFiles         int   // RLIMIT_NOFILE
	FileBytes         int64 // RLIMIT_FSIZE: the largest file a process may write; also /tmp's size
	CPUSeconds        int   // RLIMIT_CPU of each process; 0 for commands with a wall-clock timeout
}

// DefaultLimits are the limits of a command when the configuration names
// none: 256 processes, 2 GiB of address space, 1,024 open files, 1 GiB files.
func DefaultLimits() Limits {
	return Limits{Processes: 256, AddressSpaceBytes: 2 << 30, OpenFiles: 1024, FileBytes: 1 << 30}
}

// Config configures the sandbox. Zero values take the defaults.
type Config struct {
	Mode string // Auto (default), Bwrap or None
	// UID and GID are the host user and group bubblewrap runs as when
	// Baton's effective uid is 0 (default NobodyID), and the ids a command
	// sees inside. They must not be 0.
	UID, GID int
	Limits   Limits // default DefaultLimits
	// Network says whether commands may be given the network
	// (Spec.Network); New then also probes user-mode networking. When false
	// a Spec asking for network is refused.
	Network bool
	// Workspaces is the directory under which every writable bind lives;
	// the probe checks the sandbox's user can reach it (default: a
	// temporary directory).
	Workspaces string
	// Paths of the helpers (defaults: looked up in PATH). They must lie in
	// the system directories the sandbox shows (/usr, /bin, …) as prlimit
	// runs inside.
	BwrapPath, PrlimitPath, PastaPath, IPPath string
	// Path is the PATH a command sees (default: the usual system
	// directories).
	Path string
	// Bridge is a binary that runs egress.Bridge when given
	// egress.BridgeSubcommand (the baton binary): what Spec.Egress needs.
	// It is opened once, by New, and handed to each such command as a
	// read-only descriptor, wherever it is installed. "": commands cannot
	// be given the egress proxy.
	Bridge string
	Logger *slog.Logger
}

// DefaultPath is the PATH commands see unless Config.Path says otherwise.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Sandbox runs commands inside the probed sandbox. It is immutable after
// New and safe for concurrent use.
type Sandbox struct {
	cfg      Config
	log      *slog.Logger
	bwrap    string // absolute path; "" unless the sandbox is bubblewrap
	prlimit  string // absolute path; "" when rlimits cannot be set (mode none only)
	pasta    string // absolute path; "" without network
	ip       string
	netErr   error  // why Spec.Network is refused; nil when it can be granted
	disabled string // why the sandbox is unavailable; "" when it works
	// asRoot: Baton's euid is 0, so bubblewrap starts as cfg.UID/GID.
	asRoot bool
	cgroup *cgroups // nil when no cgroup v2 subtree is delegated
	bridge *os.File // Config.Bridge, open; nil without
	seq    atomic.Int64
}

// New builds the sandbox and, unless Mode is None, probes it once. Under
// Auto a failed probe leaves a Sandbox whose Available reports why (the
// reason is also logged); under Bwrap it is an error. With Config.Network
// the user-mode network is probed too: when it fails, Network reports why
// and commands asking for it are refused, never given the host's network
// (piece validation refuses the movements that would ask).
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	if cfg.Mode == "" {
		cfg.Mode = Auto
	}
	if cfg.UID == 0 {
		cfg.UID = NobodyID
	}
	if cfg.GID == 0 {
		cfg.GID = NobodyID
	}
	if cfg.UID < 0 || cfg.GID < 0 {
		return nil, fmt.Errorf("sandbox: uid %d, gid %d: want positive ids", cfg.UID, cfg.GID)
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	for p, def := range map[*string]string{&cfg.BwrapPath: "bwrap", &cfg.PrlimitPath: "prlimit", &cfg.PastaPath: "pasta", &cfg.IPPath: "ip"} {
		if *p == "" {
			*p = def
		}
	}
	s := &Sandbox{cfg: cfg, log: cfg.Logger, asRoot: os.Geteuid() == 0}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "sandbox")
	s.netErr = errors.New("the operator has not allowed network access (tools.bash.network)")
	if p, err := exec.LookPath(cfg.PrlimitPath); err == nil {
		s.prlimit = p
	}
	switch cfg.Mode {
	case None:
		s.log.Warn("commands run without a sandbox (tools.bash.sandbox: none): they can read and write anything Baton can")
		if s.prlimit == "" {
			s.log.Warn("prlimit not found: commands run without resource limits", "prlimit", cfg.PrlimitPath)
		}
		if cfg.Network {
			s.netErr = nil // the host's own network: the operator's choice
		}
		return s, nil
	case Auto, Bwrap:
	default:
		return nil, fmt.Errorf("sandbox: mode %q: want auto, bwrap or none", cfg.Mode)
	}
	if err := s.probe(ctx); err != nil {
		if cfg.Mode == Bwrap {
			return nil, fmt.Errorf("sandbox bwrap: %w", err)
		}
		s.bwrap = ""
		s.disabled = fmt.Sprintf("the bubblewrap sandbox does not work on this host (%v); "+
			"an operator can fix the host or set tools.bash.sandbox", err)
		s.log.Warn("Bash disabled: bubblewrap does not work here", "reason", err, "also", "the git excerpt")
		return s, nil
	}
	s.cgroup = detectCgroups(s.log)
	if cfg.Bridge != "" {
		f, err := os.Open(cfg.Bridge) // kept open for the life of the process
		if err != nil {
			s.log.Warn("commands cannot be given the egress proxy: its bridge cannot be opened", "bridge", cfg.Bridge, "err", err)
		} else {
			s.bridge = f
		}
	}
	if cfg.Network {
		if err := s.probeNetwork(ctx); err != nil {
			s.netErr = err
			s.log.Warn("the sandbox's network does not work here: movements with network: true are refused", "reason", err)
		} else {
			s.netErr = nil
		}
	}
	return s, nil
}

// Available reports whether commands can run, and if not, why.
func (s *Sandbox) Available() (bool, string) { return s.disabled == "", s.disabled }

// Isolated reports whether commands run inside bubblewrap (false under
// None and when the sandbox is unavailable).
func (s *Sandbox) Isolated() bool { return s.bwrap != "" }

// Network returns nil when a command may be given the network, else why
// not: the operator did not allow it, or user-mode networking does not
// work on this host.
func (s *Sandbox) Network() error { return s.netErr }

// Owner returns the host user and group that must own what a sandboxed
// command may write, and whether that differs from Baton's own (true when
// Baton runs as root and the sandbox is bubblewrap).
func (s *Sandbox) Owner() (uid, gid int, differs bool) {
	if s.asRoot && s.Isolated() {
		return s.cfg.UID, s.cfg.GID, true
	}
	return os.Geteuid(), os.Getegid(), false
}

// Limits returns the configured per-command limits.
func (s *Sandbox) Limits() Limits { return s.cfg.Limits }

// Bind is a host directory or file shown at the same path inside.
type Bind struct {
	Path     string
	Writable bool
}

// Spec is one command to run.
type Spec struct {
	Argv []string // Argv[0] is an absolute path or found in Config.Path
	Dir  string   // working directory inside (a bind or below one)
	// Binds in order: a later bind is mounted over an earlier one (a
	// read-only logs/ over a writable workspace).
	Binds   []Bind
	Env     []string // the whole environment: nothing of Baton's is passed
	Network bool     // refused unless Network() is nil
	// Egress, when set, gives the command the egress proxy as its only
	// way out (not with Network). Outside bubblewrap (mode none) it is
	// left out: such a command has the host's network.
	Egress *Egress
	Limits *Limits // nil: Config.Limits
	// NoCgroup keeps the command out of a cgroup of its own, for callers
	// that never Close it and rely on its rlimits (the parser child).
	NoCgroup bool
}

// Egress is a command's way out through the egress proxy: the session's
// endpoint (egress.Endpoint).
type Egress struct {
	Socket string // host path of the session's Unix socket
	CAFile string // host path of the CA bundle its TLS clients trust; "": the system's
	Locale string // the locale the bridge words its own failures in ("": English)
}

// Paths inside the sandbox of a command given the egress proxy.
const (
	caBundle = "/run/baton/ca-bundle.pem"
	bridgeFD = "/proc/self/fd/3" // the bridge binary, Cmd.ExtraFiles[0]
)

// egressEnv is what a command given the egress proxy finds in its
// environment: every proxy variable, in both cases, at the bridge, with
// no exception, and, with a CA bundle, the variables TLS clients read it
// from (OpenSSL, git, Python requests and pip, Node, curl).
func egressEnv(eg *Egress) []string {
	proxy := "http://" + egress.BridgeAddr
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+proxy, strings.ToLower(k)+"="+proxy)
	}
	env = append(env, "NO_PROXY=", "no_proxy=")
	if eg.CAFile != "" {
		for _, k := range []string{"SSL_CERT_FILE", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"} {
			env = append(env, k+"="+caBundle)
		}
	}
	return env
}

// Cmd is a command ready to start. It runs in its own process group,
// killed as a whole when its context ends (Cancel) and after Wait returns
// (Kill); WaitDelay is set. Call Close once it has been waited for.
type Cmd struct {
	*exec.Cmd
	cleanup func()
}

// Kill sends SIGKILL to the command's process group: its children left
// behind die with it (in bubblewrap, killing the group ends the PID
// namespace).
func (c *Cmd) Kill() error { return killGroup(c.Cmd) }

// Close releases what the command held (its cgroup).
func (c *Cmd) Close() {
	if c.cleanup != nil {
		c.cleanup()
		c.cleanup = nil
	}
}

// Command builds the command for spec. It does not start it: the caller
// sets Stdin, Stdout and Stderr, then Start and Wait, then Close.
func (s *Sandbox) Command(ctx context.Context, spec Spec) (*Cmd, error) {
	if s.disabled != "" {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, s.disabled)
	}
	if len(spec.Argv) == 0 {
		return nil, errors.New("sandbox: empty command")
	}
	if spec.Network && s.netErr != nil {
		return nil, fmt.Errorf("sandbox: network refused: %w", s.netErr)
	}
	if !s.Isolated() {
		spec.Egress = nil
	}
	if spec.Egress != nil {
		switch {
		case spec.Network:
			return nil, errors.New("sandbox: a command is given the network or the egress proxy, not both")
		case s.bridge == nil:
			return nil, errors.New("sandbox: the egress proxy's bridge is not available (Config.Bridge)")
		}
	}
	lim := s.cfg.Limits
	if spec.Limits != nil {
		lim = *spec.Limits
	}
	argv := spec.Argv
	if s.prlimit != "" {
		argv = append(prlimitArgs(s.prlimit, lim, s.Isolated()), argv...)
	}
	if spec.Egress != nil {
		// The bridge runs first, outside the rlimits meant for the
		// command, and starts it once it listens.
		argv = egress.BridgeArgs(bridgeFD, egress.BridgeSocket, cmp.Or(spec.Egress.Locale, "en"), argv)
	}
	var cmd *exec.Cmd
	switch {
	case !s.Isolated():
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = spec.Dir
		cmd.Env = spec.Env
	case spec.Network:
		args := append(s.pastaArgs(), s.bwrapArgs(spec, lim, argv)...)
		cmd = exec.CommandContext(ctx, s.pasta, args...)
	default:
		cmd = exec.CommandContext(ctx, s.bwrap, s.bwrapArgs(spec, lim, argv)[1:]...)
	}
	if s.Isolated() {
		// bubblewrap and pasta see only PATH; the command gets spec.Env
		// through --setenv. "/" is a directory the sandbox's user can
		// enter whatever the caller's working directory.
		cmd.Env = []string{"PATH=" + s.cfg.Path}
		cmd.Dir = "/"
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.asRoot && s.Isolated() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.cfg.UID), Gid: uint32(s.cfg.GID), Groups: []uint32{}}
	}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = WaitDelay
	if spec.Egress != nil {
		cmd.ExtraFiles = []*os.File{s.bridge}
	}
	c := &Cmd{Cmd: cmd}
	if s.cgroup != nil && s.Isolated() && !spec.NoCgroup {
		fd, cleanup, err := s.cgroup.child(strconv.FormatInt(s.seq.Add(1), 10), lim)
		if err != nil {
			s.log.Warn("cgroup limits not applied to this command", "err", err)
		} else {
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = fd
			c.cleanup = cleanup
		}
	}
	return c, nil
}

// systemDirs are shown read-only inside: the usual system directories, not
// the whole root, so that other workspaces, Baton's data directory and home
// directories stay out of sight.
var systemDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// bwrapArgs returns bubblewrap's command line, bwrap's own path first.
// The order matters: the fresh /tmp comes before any bind, which may live
// under /tmp.
func (s *Sandbox) bwrapArgs(spec Spec, lim Limits, argv []string) []string {
	args := []string{s.bwrap, "--ro-bind", "/usr", "/usr"}
	for _, d := range systemDirs {
		args = append(args, "--ro-bind-try", d, d)
	}
	args = append(args, "--dev", "/dev", "--proc", "/proc")
	// The host's sysctls and kernel knobs stay read-only whatever the
	// process's ids (as flatpak does).
	for _, d := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"} {
		args = append(args, "--ro-bind-try", d, d)
	}
	if lim.FileBytes > 0 {
		args = append(args, "--size", strconv.FormatInt(lim.FileBytes, 10))
	}
	args = append(args, "--tmpfs", "/tmp")
	for _, b := range spec.Binds {
		op := "--ro-bind"
		if b.Writable {
			op = "--bind"
		}
		args = append(args, op, b.Path, b.Path)
	}
	env := spec.Env
	if eg := spec.Egress; eg != nil {
		// A socket bound read-only can still be connected to.
		args = append(args, "--ro-bind", eg.Socket, egress.BridgeSocket)
		if eg.CAFile != "" {
			args = append(args, "--ro-bind", eg.CAFile, caBundle)
		}
		env = append(slices.Clip(env), egressEnv(eg)...)
	}
	args = append(args, "--unshare-all", "--unshare-user", "--disable-userns")
	if spec.Network {
		args = append(args, "--share-net") // pasta's namespace, made before bwrap starts
	}
	args = append(args,
		"--uid", strconv.Itoa(s.cfg.UID), "--gid", strconv.Itoa(s.cfg.GID),
		"--cap-drop", "ALL", "--die-with-parent", "--new-session")
	if spec.Dir != "" {
		args = append(args, "--chdir", spec.Dir)
	}
	args = append(args, "--clearenv")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	return append(append(args, "--"), argv...)
}

// prlimitArgs sets lim on the command through util-linux's prlimit, run as
// the first program inside the sandbox. Unsandboxed (None) the process
// count is left alone: it would count every process of Baton's user.
func prlimitArgs(prlimit string, lim Limits, isolated bool) []string {
	args := []string{prlimit}
	if lim.Processes > 0 && isolated {
		args = append(args, "--nproc="+strconv.Itoa(lim.Processes))
	}
	if lim.AddressSpaceBytes > 0 {
		args = append(args, "--as="+strconv.FormatInt(lim.AddressSpaceBytes, 10))
	}
	if lim.OpenFiles > 0 {
		args = append(args, "--nofile="+strconv.Itoa(lim.OpenFiles))
	}
	if lim.FileBytes > 0 {
		args = append(args, "--fsize="+strconv.FormatInt(lim.FileBytes, 10))
	}
	if lim.CPUSeconds > 0 {
		args = append(args, "--cpu="+strconv.Itoa(lim.CPUSeconds))
	}
	return append(args, "--")
}

// killGroup sends SIGKILL to the command's process group.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}
