// Package workspace confines a task's files to its directory.
//
// A Workspace is <data_dir>/workspaces/<task id>-<random suffix>/ (the
// name its task keeps in the store) with three folders: input/ (files
// people attached), output/ (files the agent produces, sent back to the
// thread) and logs/ (engine records: tools may read them, not write them).
// Open makes all three; OpenLazy makes logs/ only and leaves input/ and
// output/ to Prepare, for a job that may never need them.
//
// The agent controls the workspace's contents (its Bash can make symlinks,
// named pipes and swap folders at any moment), so Baton's own process never
// touches a file in it by an absolute path. Every host-side access goes
// through a Workspace method, done on an os.Root opened on the workspace:
// each step of a path is opened relative to the one before, and a symlink
// that leads out is refused at the moment it is met, so a swap racing the
// call can move a write or a read to another place inside the workspace but
// never outside it. Records under logs/ are written through a root opened
// on logs/ itself (OpenLog, WriteLog), so they stay inside logs/, and a
// reader outside the sandbox (the task API's downloads) opens files of input/
// or output/ through a root on that folder (OpenIn). Opens
// refuse anything but a regular file (ErrNotRegular) without blocking on a
// named pipe, and walks (Walk, Files) never follow a symlink.
//
// Resolve and ResolveWrite check a path before the access: they give the
// clear errors the model sees (ErrOutside, ErrReadOnly) and expand the
// symlinks inside the workspace that os.Root would refuse (absolute ones).
// The refusal of logs/ for tools is that check; confinement to the
// workspace does not depend on it.
//
// Claim ties the directory of all workspaces to one store, so that a new
// store never hands old workspaces to new tasks; Quota applies a
// workspace's size cap and data_dir's free-space floor to tool calls.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Folder names inside a workspace.
const (
	Input  = "input"
	Output = "output"
	Logs   = "logs"
)

// maxLinks bounds symlink expansion, as the kernel does (ELOOP).
const maxLinks = 40

var (
	// ErrOutside reports a path that is absolute, climbs out with "..", or
	// reaches outside the workspace through a symlink.
	ErrOutside = errors.New("path is outside the workspace")
	// ErrReadOnly reports a write into logs/, which belongs to the engine.
	ErrReadOnly = errors.New("logs/ is read-only for tools")
)

// Workspace is one task's directory. Its methods are safe for concurrent use,
// though concurrent writers to the same files must coordinate among
// themselves. Close releases the directory handle it holds (a Workspace
// dropped without Close releases it when collected).
type Workspace struct {
	root string   // absolute, symlinks evaluated
	dir  *os.Root // root, opened once: every host-side access goes through it
}

// FileInfo describes one regular file in a listing.
type FileInfo struct {
	Name    string // slash-separated, relative to the workspace root (e.g. "input/a.txt")
	Size    int64
	ModTime time.Time
}

// Open creates dir and its input/, output/ and logs/ folders when missing and
// returns the workspace rooted there.
func Open(dir string) (*Workspace, error) {
	w, err := OpenLazy(dir)
	if err != nil {
		return nil, err
	}
	if err := w.Prepare(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// OpenLazy creates dir and its logs/ folder when missing and returns the
// workspace rooted there; input/ and output/ are left to Prepare, which
// must run before tools are given the workspace. A job that never runs a
// tool then costs two directories fewer (creating one is a slow metadata
// write on many disks).
func OpenLazy(dir string) (*Workspace, error) {
	if dir == "" {
		return nil, errors.New("open workspace: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	w, err := OpenExisting(abs)
	if err != nil {
		return nil, err
	}
	if err := w.mkdir(Logs); err != nil {
		w.Close()
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	return w, nil
}

// OpenExisting returns the workspace rooted at dir without creating
// anything, for a reader such as the outbox; it fails when dir is missing.
func OpenExisting(dir string) (*Workspace, error) {
	if dir == "" {
		return nil, errors.New("open workspace: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	d, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	return &Workspace{root: root, dir: d}, nil
}

// Close releases the workspace's directory handle; the Workspace must not
// be used afterwards.
func (w *Workspace) Close() error { return w.dir.Close() }

// Prepare creates input/ and output/ when missing.
func (w *Workspace) Prepare() error {
	for _, sub := range []string{Input, Output} {
		if err := w.mkdir(sub); err != nil {
			return fmt.Errorf("prepare workspace %s: %w", w.root, err)
		}
	}
	return nil
}

// mkdir creates the top-level folder name when nothing has that name yet.
func (w *Workspace) mkdir(name string) error {
	if err := w.dir.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// Root returns the workspace's absolute directory, with symlinks evaluated,
// for what runs in the sandbox (whose only writable tree it is). Baton's own
// process uses the workspace's methods instead of paths under it.
func (w *Workspace) Root() string { return w.root }

// Resolve maps a workspace-relative path ("input/a.txt", "" or "." for the
// root) to an absolute path inside the workspace, expanding symlinks. It
// returns an error wrapping ErrOutside when the path is absolute, climbs
// above the root, or passes through a symlink (at any component, dangling or
// not) whose target lies outside. The returned path need not exist: missing
// components are joined as written. It is a check, true when it is made:
// open what it names through the workspace's methods, never with package os.
func (w *Workspace) Resolve(rel string) (string, error) {
	p, err := w.resolve(rel)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", rel, err)
	}
	return p, nil
}

// ResolveWrite is Resolve for a path about to be written: it also refuses the
// workspace root itself and anything that resolves into logs/ (ErrReadOnly).
func (w *Workspace) ResolveWrite(rel string) (string, error) {
	p, err := w.resolve(rel)
	if err != nil {
		return "", fmt.Errorf("resolve %q for writing: %w", rel, err)
	}
	r := w.Rel(p)
	if r == "." {
		return "", fmt.Errorf("resolve %q for writing: the workspace root is not a file", rel)
	}
	if r == Logs || strings.HasPrefix(r, Logs+"/") {
		return "", fmt.Errorf("resolve %q for writing: %w", rel, ErrReadOnly)
	}
	return p, nil
}

// Rel returns abs relative to the workspace root, slash-separated, or abs
// unchanged when it is not inside the workspace.
func (w *Workspace) Rel(abs string) string {
	r, err := filepath.Rel(w.root, abs)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return abs
	}
	return filepath.ToSlash(r)
}

func (w *Workspace) inside(p string) bool {
	return p == w.root || strings.HasPrefix(p, w.root+string(filepath.Separator))
}

func (w *Workspace) resolve(rel string) (string, error) {
	if strings.IndexByte(rel, 0) >= 0 {
		return "", errors.New("path contains a NUL byte")
	}
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: absolute paths are refused; use a path relative to the workspace such as input/a.txt", ErrOutside)
	}
	clean := filepath.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: it climbs above the workspace with ..", ErrOutside)
	}
	parts := split(clean)
	cur := w.root
	links := 0
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			if !w.inside(cur) {
				return "", fmt.Errorf("%w: a symlink climbs above the workspace", ErrOutside)
			}
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			cur = next // missing: nothing below it can be a symlink yet
			continue
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		links++
		if links > maxLinks {
			return "", errors.New("too many levels of symbolic links")
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			t := filepath.Clean(target)
			if !w.inside(t) {
				return "", fmt.Errorf("%w: %s is a symlink to %s", ErrOutside, w.Rel(next), target)
			}
			r, err := filepath.Rel(w.root, t)
			if err != nil {
				return "", err
			}
			cur = w.root
			parts = append(split(r), parts...)
			continue
		}
		// A relative target is read from the link's directory (cur).
		parts = append(split(target), parts...)
	}
	if !w.inside(cur) {
		return "", ErrOutside
	}
	return cur, nil
}

func split(p string) []string {
	return strings.Split(filepath.ToSlash(p), "/")
}

// Files lists the regular files under sub (a workspace-relative folder such
// as "input"), recursively, sorted by name. It returns at most max entries
// (all when max <= 0) and how many more there are. Symlinks are not followed
// nor listed. A missing folder lists as empty.
func (w *Workspace) Files(sub string, max int) ([]FileInfo, int, error) {
	var all []FileInfo
	err := w.Walk(sub, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed while walking
		}
		all = append(all, FileInfo{Name: p, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", sub, err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	if max > 0 && len(all) > max {
		return all[:max], len(all) - max, nil
	}
	return all, 0, nil
}
