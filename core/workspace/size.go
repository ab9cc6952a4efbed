package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Disk limits: a size cap per workspace and a free-space floor for
// data_dir, checked around the tool calls that write (see Quota).

var (
	// ErrOverCap reports a workspace over its size cap.
	ErrOverCap = errors.New("the workspace is over its size cap")
	// ErrLowSpace reports data_dir's file system below its free-space floor.
	ErrLowSpace = errors.New("data_dir is below its free-space floor")
)

// LimitError is a call refused by Quota.Admit. It wraps ErrOverCap or
// ErrLowSpace.
type LimitError struct {
	Err error // ErrOverCap or ErrLowSpace
	// Used is the workspace's size (ErrOverCap) or data_dir's free space
	// (ErrLowSpace), in bytes.
	Used int64
	// Limit is the cap or the floor, in bytes.
	Limit int64
	// Grew (ErrOverCap): a call that may delete files made the workspace
	// bigger while it was over its cap, so such calls are refused too.
	Grew bool
	// Uncounted (ErrOverCap): the workspace holds more entries, or deeper
	// directories, than a measurement walks (see Measure).
	Uncounted bool
}

func (e *LimitError) Error() string {
	switch {
	case errors.Is(e.Err, ErrLowSpace):
		return fmt.Sprintf("%v: %d bytes free, floor %d", e.Err, e.Used, e.Limit)
	case e.Uncounted:
		return fmt.Sprintf("%v: too many files to count", e.Err)
	}
	return fmt.Sprintf("%v: %d bytes, cap %d", e.Err, e.Used, e.Limit)
}

func (e *LimitError) Unwrap() error { return e.Err }

// Usage is a workspace's size as its cap counts it.
type Usage struct {
	// Bytes adds up every entry under the root (files, directories,
	// links): each counts the larger of its length (regular files) and
	// the space allocated to it. A 10 GB sparse file counts 10 GB, since
	// copying it out of the workspace (a subtask's results, an upload)
	// writes that much; many one-byte files count the blocks they take.
	Bytes int64
	// Entries is how many entries were counted.
	Entries int64
	// Partial reports a walk stopped at MaxEntries entries or MaxDepth
	// levels: Bytes counts only what it saw.
	Partial bool
}

// Bounds of one measurement: a workspace past them is not counted further
// and counts as over any cap.
const (
	MaxEntries = 1_000_000
	MaxDepth   = 256
)

// Measure walks the tree under dir and returns its Usage. Symlinks are
// counted, never followed; every directory is opened from its parent
// without following links, so a tree changing under the walk is never
// left. Entries that vanish while it walks are skipped. The cost is one
// getdents per directory and one fstatat per entry: about 100 ms for
// 100,000 files with a warm cache.
func Measure(ctx context.Context, dir string) (Usage, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Usage{}, fmt.Errorf("measure %s: %w", dir, err)
	}
	var u Usage
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil {
		u.Bytes += st.Blocks * 512
	}
	if err := measureDir(ctx, fd, dir, 1, &u); err != nil {
		return u, fmt.Errorf("measure %s: %w", dir, err)
	}
	return u, nil
}

// measureDir adds the entries of the directory open as fd (closed on
// return) to u, and those of its subdirectories, depth levels below the
// root.
func measureDir(ctx context.Context, fd int, name string, depth int, u *Usage) error {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := f.ReadDir(1024)
		for _, e := range ents {
			if u.Entries >= MaxEntries {
				u.Partial = true
				return nil
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone since the listing
			}
			u.Entries++
			u.Bytes += charged(&st)
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			if depth >= MaxDepth {
				u.Partial = true
				continue
			}
			// O_NOFOLLOW: a directory swapped for a link since the
			// fstatat is not entered.
			sub, err := unix.Openat(fd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			if err := measureDir(ctx, sub, e.Name(), depth+1, u); err != nil {
				return err
			}
			if u.Partial && u.Entries >= MaxEntries {
				return nil
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(ents) == 0) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// FloorConfig configures a Floor.
type FloorConfig struct {
	// Dir is a directory on the file system to watch (data_dir).
	Dir string
	// MinFreeBytes is the floor: below it tool writes are refused. 0
	// disables the floor.
	MinFreeBytes int64
	// Statfs returns the bytes available to unprivileged users on the
	// file system of path; nil is statfs(2). Tests inject it.
	Statfs func(path string) (int64, error)
	// Logger is told when free space crosses the floor; nil discards.
	Logger *slog.Logger
}

// Floor is data_dir's free-space floor, shared by every job of a process:
// below it, tools may not write, so that the store keeps room for its own
// writes. It is safe for concurrent use.
type Floor struct {
	cfg FloorConfig
	low atomic.Bool // below the floor at the last check
}

// NewFloor returns the floor cfg describes.
func NewFloor(cfg FloorConfig) *Floor {
	if cfg.Statfs == nil {
		cfg.Statfs = statfs
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Floor{cfg: cfg}
}

func statfs(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Check returns nil when Dir's file system has at least MinFreeBytes
// available, else a *LimitError wrapping ErrLowSpace; a file system it
// cannot query is an error too. The first check below the floor logs an
// error, the first above it again an info line.
func (f *Floor) Check() error {
	if f == nil || f.cfg.MinFreeBytes <= 0 {
		return nil
	}
	free, err := f.cfg.Statfs(f.cfg.Dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", f.cfg.Dir, err)
	}
	if free >= f.cfg.MinFreeBytes {
		if f.low.CompareAndSwap(true, false) {
			f.cfg.Logger.Info("data_dir has room again: tools may write", "dir", f.cfg.Dir, "free_bytes", free, "min_free_bytes", f.cfg.MinFreeBytes)
		}
		return nil
	}
	if f.low.CompareAndSwap(false, true) {
		f.cfg.Logger.Error("data_dir is below its free-space floor: tools may not write until space is freed",
			"dir", f.cfg.Dir, "free_bytes", free, "min_free_bytes", f.cfg.MinFreeBytes)
	}
	return &LimitError{Err: ErrLowSpace, Used: free, Limit: f.cfg.MinFreeBytes}
}

// Quota enforces a workspace's size cap and data_dir's floor on the tool
// calls of one job, which run one at a time: it is not safe for
// concurrent use.
//
// Before each call that may write, Admit refuses it below the floor, and
// over the cap refuses calls that only write (Write, Edit). A call that
// may also delete files (Bash) still runs over the cap, since deleting is
// how the agent gets back under it; but once such a call leaves the
// workspace bigger than it found it while over, those are refused too,
// until the workspace is under the cap again. After each call that may
// write, Update counts the workspace again: the whole tree (Measure) at
// the job's first writing call and after every call that may delete; for
// a call that writes one named file, by how much that file changed, so
// that Write and Edit stay cheap in a workspace of 100,000 files. The cap
// is checked after calls, so one call may overshoot it; the floor bounds
// what that costs the disk.
type Quota struct {
	ws       *Workspace
	maxBytes int64
	floor    *Floor

	measured bool
	usage    Usage
	over     bool
	grew     bool   // a deleting call grew the workspace while it was over
	file     string // the file the admitted call writes ("": none)
	before   int64  // its charge when the call was admitted
}

// NewQuota returns the quota of ws: a cap of maxBytes (0: none) and floor
// (nil: none).
func NewQuota(ws *Workspace, maxBytes int64, floor *Floor) *Quota {
	return &Quota{ws: ws, maxBytes: maxBytes, floor: floor}
}

// Call describes a tool call to a Quota.
type Call struct {
	// Deletes: the tool may create, change or delete any file (Bash).
	Deletes bool
	// Path is the workspace-relative file the call writes when it writes
	// that one file alone (Write, Edit); "" otherwise.
	Path string
}

// QuotaStatus is a workspace's state after a call.
type QuotaStatus struct {
	Usage    Usage
	MaxBytes int64 // the cap; 0: none
	// Over: Usage is over the cap (or could not be counted whole).
	Over bool
	// Grew: a deleting call made the workspace bigger while it was over;
	// deleting calls are refused now too.
	Grew bool
	// Back: the workspace was over the cap before the call and is not now.
	Back bool
}

// Admit reports whether call may run: nil, or a *LimitError wrapping
// ErrLowSpace or ErrOverCap, or an error measuring.
func (q *Quota) Admit(ctx context.Context, call Call) error {
	q.file = ""
	if err := q.floor.Check(); err != nil {
		return err
	}
	if q.maxBytes <= 0 {
		return nil
	}
	if !q.measured {
		if _, err := q.Update(ctx, Call{}); err != nil {
			return err
		}
	}
	if q.over && (!call.Deletes || q.grew) {
		return &LimitError{Err: ErrOverCap, Used: q.usage.Bytes, Limit: q.maxBytes, Grew: q.grew, Uncounted: q.usage.Partial}
	}
	if call.Path != "" && !call.Deletes {
		if p, err := q.ws.Resolve(call.Path); err == nil {
			q.file, q.before = p, charge(p)
		}
	}
	return nil
}

// Update counts the workspace after call, which Admit let run (see Quota).
func (q *Quota) Update(ctx context.Context, call Call) (QuotaStatus, error) {
	if q.maxBytes <= 0 {
		return QuotaStatus{}, nil
	}
	wasOver, before := q.over && q.measured, q.usage.Bytes
	file := q.file
	q.file = ""
	if q.measured && !call.Deletes && call.Path != "" && file != "" {
		q.usage.Bytes = max(0, q.usage.Bytes+charge(file)-q.before)
	} else {
		u, err := Measure(ctx, q.ws.Root())
		if err != nil {
			return QuotaStatus{}, err
		}
		q.measured, q.usage = true, u
	}
	q.over = q.usage.Partial || q.usage.Bytes > q.maxBytes
	switch {
	case !q.over:
		q.grew = false
	case wasOver && call.Deletes && q.usage.Bytes > before:
		q.grew = true
	}
	return QuotaStatus{Usage: q.usage, MaxBytes: q.maxBytes, Over: q.over, Grew: q.grew, Back: wasOver && !q.over}, nil
}

// charge is what the file at path counts in a Usage; 0 when it is missing.
func charge(path string) int64 {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0
	}
	return charged(&st)
}

// charged is what an entry counts in a Usage: the larger of its length
// (a regular file's) and the space allocated to it.
func charged(st *unix.Stat_t) int64 {
	c := st.Blocks * 512
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		c = max(c, st.Size)
	}
	return c
}
