package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// probeTimeout bounds each probe run.
const probeTimeout = 15 * time.Second

// probeScript runs inside the sandbox and prints one FAIL line per broken
// guarantee, then the process's limits. $1 is a directory it must be able
// to write. Writing /proc/sys writes back the value read, so a sandbox that
// lets it through changes nothing.
const probeScript = `
cap=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
[ "$cap" = 0000000000000000 ] || echo "FAIL: the process keeps capabilities (CapEff $cap)"
[ "$(id -u)" != 0 ] || echo "FAIL: the process runs as uid 0"
if command -v mount >/dev/null && mount -o remount,rw /usr 2>/dev/null; then echo "FAIL: /usr could be remounted read-write"; fi
if (: > /usr/.baton-probe) 2>/dev/null; then rm -f /usr/.baton-probe; echo "FAIL: /usr is writable"; fi
if [ -e /etc/shadow ] && head -c1 /etc/shadow >/dev/null 2>&1; then echo "FAIL: /etc/shadow is readable"; fi
if (cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern) 2>/dev/null; then echo "FAIL: /proc/sys is writable"; fi
awk '$5 == "/proc/sys" { found = 1; if ($6 !~ /^ro/) bad = 1 } END { if (!found || bad) print "FAIL: /proc/sys is not mounted read-only" }' /proc/self/mountinfo
if ! (: > "$1/probe") 2>/dev/null; then echo "FAIL: the workspace is not writable by the sandbox's user"; fi
echo LIMITS
cat /proc/self/limits
`

// probe runs the real sandbox once and checks its guarantees from inside.
func (s *Sandbox) probe(ctx context.Context) error {
	bw, err := exec.LookPath(s.cfg.BwrapPath)
	if err != nil {
		return fmt.Errorf("bubblewrap not found: %w", err)
	}
	if s.prlimit == "" {
		return fmt.Errorf("prlimit (util-linux) not found as %q: the sandbox cannot set resource limits", s.cfg.PrlimitPath)
	}
	if !inSystemDirs(s.prlimit) {
		return fmt.Errorf("prlimit %s is outside the directories the sandbox shows (/usr, /bin, …)", s.prlimit)
	}
	s.bwrap = bw
	dir, cleanup, err := s.probeDir()
	if err != nil {
		return err
	}
	defer cleanup()
	if s.asRoot {
		if err := reachable(filepath.Dir(dir), s.cfg.UID, s.cfg.GID); err != nil {
			return err
		}
	}
	out, err := s.run(ctx, Spec{
		Argv:  []string{"/bin/sh", "-c", probeScript, "probe", dir},
		Dir:   dir,
		Binds: []Bind{{Path: dir, Writable: true}},
		Env:   []string{"PATH=" + s.cfg.Path, "LANG=C"},
	})
	if err != nil {
		return err
	}
	if err := s.checkProbe(out); err != nil {
		return err
	}
	// The file the probe wrote tells which host user the process was.
	fi, err := os.Lstat(filepath.Join(dir, "probe"))
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid == 0 {
		return errors.New("the sandbox is not safe here: the process runs as root on the host")
	}
	return nil
}

// probeDir creates a directory like a workspace, under Config.Workspaces,
// owned by the sandbox's user when Baton runs as root.
func (s *Sandbox) probeDir() (string, func(), error) {
	parent := s.cfg.Workspaces
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", nil, fmt.Errorf("probe: %w", err)
		}
	}
	dir, err := os.MkdirTemp(parent, ".sandbox-probe-")
	if err != nil {
		return "", nil, fmt.Errorf("probe: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	// MkdirTemp makes it 0700; a workspace is 0755.
	if err := os.Chmod(dir, 0o755); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("probe: %w", err)
	}
	if s.asRoot {
		if err := os.Lchown(dir, s.cfg.UID, s.cfg.GID); err != nil {
			cleanup()
			return "", nil, fmt.Errorf("probe: %w", err)
		}
	}
	return dir, cleanup, nil
}

// run runs spec and returns its combined output; a non-zero exit is an
// error carrying the output's start.
func (s *Sandbox) run(ctx context.Context, spec Spec) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd, err := s.Command(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer cmd.Close()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	cmd.Kill() //nolint:errcheck // children left behind, if any
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 300 {
			msg = msg[:300]
		}
		if msg != "" {
			return nil, fmt.Errorf("%s: %w: %s", cmd.Path, err, msg)
		}
		return nil, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	return out.Bytes(), nil
}

// checkProbe reads the probe script's output: no FAIL line, and the
// configured limits in force.
func (s *Sandbox) checkProbe(out []byte) error {
	var fails []string
	report, limits, ok := bytes.Cut(out, []byte("LIMITS\n"))
	if !ok {
		return fmt.Errorf("probe: unexpected output %q", clip(out))
	}
	sc := bufio.NewScanner(bytes.NewReader(report))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "FAIL: ") {
			fails = append(fails, strings.TrimPrefix(line, "FAIL: "))
		}
	}
	got := parseLimits(limits)
	want := s.cfg.Limits
	check := func(name string, want int64) {
		if want > 0 && got[name] != want {
			fails = append(fails, fmt.Sprintf("%s is %d, want %d", name, got[name], want))
		}
	}
	check("Max processes", int64(want.Processes))
	check("Max address space", want.AddressSpaceBytes)
	check("Max open files", int64(want.OpenFiles))
	check("Max file size", want.FileBytes)
	check("Max cpu time", int64(want.CPUSeconds))
	if len(fails) > 0 {
		return fmt.Errorf("the sandbox is not safe here: %s", strings.Join(fails, "; "))
	}
	return nil
}

// parseLimits reads the soft limits of /proc/PID/limits by name
// ("Max processes"); "unlimited" is -1.
func parseLimits(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 26 || !strings.HasPrefix(line, "Max ") {
			continue
		}
		name := strings.TrimSpace(line[:25])
		fields := strings.Fields(line[25:])
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "unlimited" {
			out[name] = -1
			continue
		}
		if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[name] = n
		}
	}
	return out
}

func clip(b []byte) string {
	if len(b) > 300 {
		b = b[:300]
	}
	return string(b)
}

// inSystemDirs reports whether p lies in a directory the sandbox shows.
func inSystemDirs(p string) bool {
	for _, d := range append([]string{"/usr"}, systemDirs...) {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// Reachable reports whether uid/gid (without supplementary groups) can
// search every directory from / down to dir, as the probe requires of the
// workspaces when Baton runs as root: nil, or an error naming the first
// directory it cannot enter and how to fix that. It lets a caller (baton
// doctor) name the trap without running the sandbox.
func Reachable(dir string, uid, gid int) error { return reachable(dir, uid, gid) }

// reachable checks that uid/gid (without supplementary groups) can search
// every directory from / down to dir: bubblewrap resolves a bind's source
// as the user it runs as, and fails on a parent it cannot enter.
func reachable(dir string, uid, gid int) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	p := "/"
	parts := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	for i := 0; i <= len(parts); i++ {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return errors.New("probe: no file owner information")
		}
		if !searchable(fi.Mode(), st, uid, gid) {
			return fmt.Errorf("the sandbox's user %d:%d cannot reach the workspaces in %s: %s is not searchable by it (mode %#o, owner %d:%d); "+
				"move data_dir elsewhere, make its parent directories traversable (chmod o+x %s), "+
				"or set tools.sandbox.uid and gid to a user that can reach it", uid, gid, dir, p, fi.Mode().Perm(), st.Uid, st.Gid, p)
		}
		if i < len(parts) {
			p = filepath.Join(p, parts[i])
		}
	}
	return nil
}

func searchable(mode fs.FileMode, st *syscall.Stat_t, uid, gid int) bool {
	perm := mode.Perm()
	switch {
	case int(st.Uid) == uid:
		return perm&0o100 != 0
	case int(st.Gid) == gid:
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}
