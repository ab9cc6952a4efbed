package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// build builds this module's baton into dir and returns its path.
func build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "baton")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/baton-bot/baton/bot").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build baton: %w\n%s", err, out)
	}
	return bin, nil
}

// process is one running baton process, its log in a file of its own.
type process struct {
	name   string // "serve", "gateway", "worker 2"
	cmd    *exec.Cmd
	log    string
	exited chan error // receives Wait's error once
	done   bool       // exited has been received from
}

// startBaton runs bin with args, the environment env only (no variable of
// the load test's own leaks in), its output in logPath.
func startBaton(name, bin, dir, logPath string, env []string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start baton %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	return p, nil
}

// logged waits until the process's log matches re and returns the first
// submatch (or the whole match when re has none). It fails when the
// process exits first or nothing matches within a minute.
func (p *process) logged(ctx context.Context, re *regexp.Regexp) (string, error) {
	deadline := time.After(60 * time.Second)
	for {
		b, err := os.ReadFile(p.log)
		if err != nil {
			return "", err
		}
		if m := re.FindSubmatch(b); m != nil {
			return string(m[len(m)-1]), nil
		}
		select {
		case err := <-p.exited:
			p.done = true
			return "", fmt.Errorf("baton %s exited before it started (%v):\n%s", p.name, err, b)
		case <-deadline:
			return "", fmt.Errorf("baton %s did not start within 60 s:\n%s", p.name, b)
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop asks the process to shut down (SIGTERM) and kills it when it has
// not within 30 s.
func (p *process) stop() {
	if p.done {
		return
	}
	p.done = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// figures reads the process's CPU time (user + system) and peak resident
// set from /proc; zero where /proc does not tell.
func (p *process) figures() (cpu time.Duration, peakRSS int64) {
	pid := p.cmd.Process.Pid
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command name (which may hold spaces) in ")".
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 12 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				peakRSS = kb << 10
			}
		}
	}
	return cpu, peakRSS
}
