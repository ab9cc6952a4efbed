package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Dir names the workspace of a new task: root/<task id>-<16 random hex
// digits>. The suffix keeps names from repeating even when task ids do (a
// store lost and started afresh, an older copy restored), so that a new
// task never opens the directory of an old one. A store chooses the name
// once, when it creates the task, and keeps it: every reader of a task's
// workspace uses Task.Workspace.
func Dir(root string, taskID int64) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return filepath.Join(root, strconv.FormatInt(taskID, 10)+"-"+hex.EncodeToString(b[:]))
}

// The directory that holds every task's workspace (<data_dir>/workspaces)
// belongs to one store. Its owner file names the store's id; Claim checks
// it when a process starts, so that a store that is new (the old one lost)
// or another store's copy never hands old workspaces to new tasks.

// ownerFile, in the workspaces directory, holds the id of the store its
// workspaces belong to.
const ownerFile = ".store-id"

// Policy says what Claim does with workspaces the store does not know.
type Policy int

const (
	// Refuse fails with ErrForeign, changing nothing.
	Refuse Policy = iota
	// Adopt keeps them, as the store's from now on.
	Adopt
	// Discard moves them out of the workspaces directory.
	Discard
)

// ErrForeign reports a workspaces directory holding workspaces of another
// store (or of a store that was lost) that no task of this store names.
var ErrForeign = errors.New("workspaces this store does not know")

// Owner is the store workspaces are claimed for.
type Owner interface {
	// StoreID returns the store's id: made when the store was created,
	// kept by copies of its file, never shared by another store.
	StoreID(ctx context.Context) (string, error)
	// Workspaces returns the workspace directory of every task it holds.
	Workspaces(ctx context.Context) ([]string, error)
}

// Claimed reports what Claim found and did.
type Claimed struct {
	// Foreign lists the workspaces (directory names) no task of the store
	// names; empty when the directory already belonged to the store.
	Foreign []string
	// MovedTo is the directory Discard moved them into; "" when nothing
	// was moved.
	MovedTo string
}

// Claim makes the workspaces directory root the store's, creating it when
// missing:
//
//   - when root's owner file names the store, nothing else is looked at;
//   - otherwise every workspace (a directory in root whose name does not
//     start with ".") that no task of the store names is foreign. None
//     foreign (a first start, a store upgraded from before owner files):
//     root becomes the store's. Some foreign: policy decides — Refuse
//     returns an error wrapping ErrForeign and changes nothing; Adopt keeps
//     them and Discard moves them into a new directory beside root
//     (<root>.discarded-<UTC time>/), and root becomes the store's.
//
// A restored older copy of the store keeps its id, so it claims root
// without a question; its new tasks still get workspaces of their own,
// since names never repeat. Several processes sharing the store may claim
// root at once.
func Claim(ctx context.Context, root string, owner Owner, policy Policy) (Claimed, error) {
	id, err := owner.StoreID(ctx)
	if err != nil {
		return Claimed{}, fmt.Errorf("claim workspaces %s: %w", root, err)
	}
	if strings.ContainsAny(id, "\n/") || id == "" {
		return Claimed{}, fmt.Errorf("claim workspaces %s: unusable store id %q", root, id)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Claimed{}, fmt.Errorf("claim workspaces: %w", err)
	}
	switch b, err := os.ReadFile(filepath.Join(root, ownerFile)); {
	case err == nil && string(bytes.TrimSpace(b)) == id:
		return Claimed{}, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return Claimed{}, fmt.Errorf("claim workspaces: %w", err)
	}
	// Listed before the store is asked: a workspace is made only after
	// its task is stored, so a task created meanwhile is never taken for
	// a foreign workspace.
	dirs, err := workspaceDirs(root)
	if err != nil {
		return Claimed{}, fmt.Errorf("claim workspaces: %w", err)
	}
	known := map[string]bool{}
	if len(dirs) > 0 {
		paths, err := owner.Workspaces(ctx)
		if err != nil {
			return Claimed{}, fmt.Errorf("claim workspaces %s: %w", root, err)
		}
		// By name: the store may spell data_dir differently (relative,
		// through a symlink) from this process.
		for _, p := range paths {
			known[filepath.Base(filepath.Clean(p))] = true
		}
	}
	var out Claimed
	for _, d := range dirs {
		if !known[d] {
			out.Foreign = append(out.Foreign, d)
		}
	}
	if len(out.Foreign) > 0 {
		switch policy {
		case Adopt:
		case Discard:
			if out.MovedTo, err = moveAside(root, out.Foreign); err != nil {
				return out, fmt.Errorf("claim workspaces: %w", err)
			}
		default:
			return out, fmt.Errorf("%w: %s holds %d (%s) that no task of this store names",
				ErrForeign, root, len(out.Foreign), sample(out.Foreign))
		}
	}
	if err := writeOwner(root, id); err != nil {
		return out, fmt.Errorf("claim workspaces: %w", err)
	}
	return out, nil
}

// workspaceDirs lists the names of the directories in root, sorted,
// leaving out those whose name starts with ".".
func workspaceDirs(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// moveAside moves the workspaces names of root into a new directory beside
// root and returns it. A workspace already gone (another process
// discarding at the same time) is skipped.
func moveAside(root string, names []string) (string, error) {
	dst := fmt.Sprintf("%s.discarded-%s", filepath.Clean(root), time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.Mkdir(dst, 0o700); err != nil {
		return "", err
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(root, n), filepath.Join(dst, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return dst, err
		}
	}
	return dst, nil
}

// writeOwner records id as root's owner, atomically: a reader sees the
// old file or the new one, whole.
func writeOwner(root, id string) error {
	f, err := os.CreateTemp(root, ownerFile+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.WriteString(id + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(root, ownerFile)); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// sample names the first few of names, for a message.
func sample(names []string) string {
	const n = 3
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}
