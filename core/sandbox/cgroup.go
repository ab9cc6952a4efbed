package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroups puts each command into a cgroup v2 child of parent with
// memory.max and pids.max, when the host delegates a writable cgroup v2
// subtree with the memory and pids controllers to Baton.
type cgroups struct {
	parent string
}

// detectCgroups finds a delegated cgroup v2 subtree and prepares it, or
// logs once why there is none (the rlimits apply either way).
func detectCgroups(log *slog.Logger) *cgroups {
	dir, nsRoot, err := findCgroup("/")
	if err == nil {
		err = enableControllers(dir, nsRoot)
	}
	if err != nil {
		log.Info("cgroup v2 limits are not applied to sandboxed commands (the rlimits are)", "reason", err)
		return nil
	}
	log.Info("sandboxed commands get a cgroup each with memory.max and pids.max", "parent", dir)
	return &cgroups{parent: dir}
}

// findCgroup returns the cgroup v2 directory of this process, below root
// ("/" outside tests), when it offers the memory and pids controllers and
// is writable, and whether it is the root of its cgroup namespace. The
// error says why not: no cgroup v2, a hybrid layout whose controllers
// are bound to cgroup v1, or a subtree that was not delegated.
func findCgroup(root string) (dir string, nsRoot bool, err error) {
	self, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return "", false, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	var path string
	found := false
	for line := range strings.SplitSeq(string(self), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path, found = p, true
		}
	}
	if !found {
		return "", false, errors.New("no cgroup v2 hierarchy (cgroup v1 only)")
	}
	mount, mountRoot, err := cgroup2Mount(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return "", false, err
	}
	rel, err := filepath.Rel(mountRoot, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", false, fmt.Errorf("this process's cgroup %s is outside the cgroup2 mount at %s", path, mount)
	}
	dir = filepath.Join(root, mount, rel)
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", filepath.Join(mount, rel, "cgroup.controllers"), err)
	}
	have := strings.Fields(string(ctrl))
	for _, c := range []string{"memory", "pids"} {
		if !slices.Contains(have, c) {
			return "", false, fmt.Errorf("the cgroup v2 hierarchy at %s has no %s controller (a hybrid layout keeps it in cgroup v1)", mount, c)
		}
	}
	if err := syscall.Access(dir, 0o2 /* W_OK */); err != nil {
		return "", false, fmt.Errorf("the cgroup %s is not delegated to Baton (not writable)", filepath.Join(mount, rel))
	}
	return dir, path == "/", nil
}

// cgroup2Mount finds the cgroup2 mount in a mountinfo file: its mount
// point and the cgroup it shows as its root.
func cgroup2Mount(mountinfo string) (mount, root string, err error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", "", fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional…] - fstype source super
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		return unescape(f[4]), unescape(f[3]), nil
	}
	return "", "", errors.New("no cgroup2 file system is mounted")
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// enableControllers turns on memory and pids for dir's children. A cgroup
// other than a namespace's root may not hold processes once it has
// controllers enabled for its children, so Baton first moves itself into a
// leaf child, "baton" (the usual pattern under systemd's Delegate=yes).
func enableControllers(dir string, nsRoot bool) error {
	sub, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	on := strings.Fields(string(sub))
	if slices.Contains(on, "memory") && slices.Contains(on, "pids") {
		return nil
	}
	if !nsRoot {
		leaf := filepath.Join(dir, "baton")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create %s: %w", leaf, err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte("0"), 0); err != nil {
			return fmt.Errorf("move Baton into %s: %w", leaf, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
		return fmt.Errorf("enable memory and pids in %s (other processes share Baton's cgroup?): %w", dir, err)
	}
	return nil
}

// child creates the cgroup of one command with lim's memory and process
// caps and returns a directory descriptor for SysProcAttr.CgroupFD and the
// cleanup that removes it once the command is gone.
func (c *cgroups) child(name string, lim Limits) (int, func(), error) {
	dir := filepath.Join(c.parent, "sandbox-"+strconv.Itoa(os.Getpid())+"-"+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return -1, nil, err
	}
	remove := func() {
		// The PID namespace's last processes may still be exiting.
		for i := 0; i < 50; i++ {
			if err := syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	write := func(file, v string) error {
		return os.WriteFile(filepath.Join(dir, file), []byte(v), 0)
	}
	var err error
	if lim.AddressSpaceBytes > 0 {
		err = errors.Join(err, write("memory.max", strconv.FormatInt(lim.AddressSpaceBytes, 10)))
		_ = write("memory.swap.max", "0") // absent without swap accounting
	}
	if lim.Processes > 0 {
		err = errors.Join(err, write("pids.max", strconv.Itoa(lim.Processes)))
	}
	if err != nil {
		remove()
		return -1, nil, err
	}
	fd, err := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		remove()
		return -1, nil, err
	}
	return fd, func() { syscall.Close(fd); remove() }, nil
}
