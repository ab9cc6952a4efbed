package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"strings"
	"syscall"
	"unicode/utf8"
)

var (
	// ErrNotRegular reports a named pipe, socket, device or other special
	// file where a regular file was wanted. Such a file is refused without
	// being read or written, so that a named pipe cannot block the caller.
	ErrNotRegular = errors.New("only regular files can be opened")
	// ErrIsDir reports a directory where a file was wanted.
	ErrIsDir = errors.New("is a directory")
)

// Every path below is workspace-relative and slash-separated, as tools
// receive them ("input/a.txt"); "" and "." name the root.

// Stat returns the file rel names, following symlinks inside the workspace.
func (w *Workspace) Stat(rel string) (fs.FileInfo, error) {
	r, err := w.target(rel, false)
	if err != nil {
		return nil, err
	}
	fi, err := w.dir.Stat(r)
	return fi, failed("stat", rel, err)
}

// OpenRead opens the regular file rel for reading and returns it with its
// information. It never blocks on a named pipe: anything but a regular file
// is refused with an error wrapping ErrNotRegular (ErrIsDir for a folder).
func (w *Workspace) OpenRead(rel string) (*os.File, fs.FileInfo, error) {
	r, err := w.target(rel, false)
	if err != nil {
		return nil, nil, err
	}
	f, err := w.dir.OpenFile(r, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	return regular(rel, f, err)
}

// ReadFile returns the content of the regular file rel (see OpenRead).
func (w *Workspace) ReadFile(rel string) ([]byte, error) {
	f, _, err := w.OpenRead(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	return b, nil
}

// Create opens rel for writing, truncated, creating it (mode 0644) and its
// folders when missing; an existing file keeps its mode. Like ResolveWrite it
// refuses logs/ (ErrReadOnly) and the root; it refuses anything but a
// regular file (ErrNotRegular, ErrIsDir) without blocking on a named pipe.
func (w *Workspace) Create(rel string) (*os.File, error) {
	return w.create(rel, os.O_TRUNC)
}

// CreateNew is Create for a file that must not exist yet: it fails with an
// error wrapping fs.ErrExist when anything (a symlink included) has the name.
func (w *Workspace) CreateNew(rel string) (*os.File, error) {
	return w.create(rel, os.O_EXCL)
}

func (w *Workspace) create(rel string, flag int) (*os.File, error) {
	r, err := w.target(rel, true)
	if err != nil {
		return nil, err
	}
	if err := w.dir.MkdirAll(path.Dir(r), 0o755); err != nil {
		return nil, failed("create folders for", rel, err)
	}
	f, err := w.dir.OpenFile(r, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK|flag, 0o644)
	f, _, err = regular(rel, f, err)
	return f, err
}

// WriteFile replaces the content of rel with data, as Create does.
func (w *Workspace) WriteFile(rel string, data []byte) error {
	f, err := w.Create(rel)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// MkdirAll creates the folder rel and its parents; it refuses logs/ like
// Create.
func (w *Workspace) MkdirAll(rel string) error {
	r, err := w.target(rel, true)
	if err != nil {
		return err
	}
	return failed("create folder", rel, w.dir.MkdirAll(r, 0o755))
}

// Remove removes the file or empty folder rel; it refuses logs/ like Create.
func (w *Workspace) Remove(rel string) error {
	r, err := w.target(rel, true)
	if err != nil {
		return err
	}
	return failed("remove", rel, w.dir.Remove(r))
}

// ReadDir lists the folder rel, sorted by name, without following the
// symlinks it holds.
func (w *Workspace) ReadDir(rel string) ([]fs.DirEntry, error) {
	r, err := w.target(rel, false)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(w.dir.FS(), r)
	return entries, failed("list", rel, err)
}

// Walk walks the tree at rel as fs.WalkDir does, in lexical order, calling
// fn with workspace-relative paths ("input/a.txt"). It never follows a
// symlink: one is passed to fn as an entry of type fs.ModeSymlink and not
// descended into. A missing rel reaches fn as an error wrapping
// fs.ErrNotExist.
func (w *Workspace) Walk(rel string, fn fs.WalkDirFunc) error {
	r, err := w.target(rel, false)
	if err != nil {
		return err
	}
	return fs.WalkDir(w.dir.FS(), r, func(p string, d fs.DirEntry, err error) error {
		return fn(p, d, failed("walk", p, err))
	})
}

// OpenLog opens the engine record rel ("logs/movements/x.jsonl") with flag
// (os.O_WRONLY|os.O_CREATE|os.O_APPEND, say), creating its folders. It is
// the engine's way into logs/, which tools may not write: the file is opened
// through a root on logs/ itself, so no symlink placed there leads out of
// logs/. Anything but a regular file is refused (ErrNotRegular).
func (w *Workspace) OpenLog(rel string, flag int) (*os.File, error) {
	inside, err := logPath(rel)
	if err != nil {
		return nil, err
	}
	lr, err := w.logs()
	if err != nil {
		return nil, err
	}
	defer lr.Close()
	if err := lr.MkdirAll(path.Dir(inside), 0o755); err != nil {
		return nil, failed("create folders for", rel, err)
	}
	f, err := lr.OpenFile(inside, flag|syscall.O_NONBLOCK, 0o644)
	f, _, err = regular(rel, f, err)
	return f, err
}

// WriteLog replaces the engine record rel with data atomically (a new file
// renamed over the old one), so a crash never leaves half of it. It is
// confined to logs/ as OpenLog is.
func (w *Workspace) WriteLog(rel string, data []byte) error {
	inside, err := logPath(rel)
	if err != nil {
		return err
	}
	lr, err := w.logs()
	if err != nil {
		return err
	}
	defer lr.Close()
	dir := path.Dir(inside)
	if err := lr.MkdirAll(dir, 0o755); err != nil {
		return failed("create folders for", rel, err)
	}
	tmp := path.Join(dir, fmt.Sprintf(".%s.%016x.tmp", path.Base(inside), rand.Uint64()))
	f, err := lr.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return failed("write", rel, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = lr.Rename(tmp, inside)
	}
	if err != nil {
		lr.Remove(tmp)
		return failed("write", rel, err)
	}
	return nil
}

// RemoveLog removes the engine record rel, confined to logs/ as OpenLog is.
func (w *Workspace) RemoveLog(rel string) error {
	inside, err := logPath(rel)
	if err != nil {
		return err
	}
	lr, err := w.logs()
	if err != nil {
		return err
	}
	defer lr.Close()
	return failed("remove", rel, lr.Remove(inside))
}

// logs opens logs/ as a root of its own (see folder).
func (w *Workspace) logs() (*os.Root, error) {
	if err := w.mkdir(Logs); err != nil {
		return nil, failed("create", "logs/", err)
	}
	return w.folder(Logs)
}

// folder opens the top-level folder name as a root of its own. It must be
// the workspace's own folder: a symlink in its place, even to a folder
// inside the workspace, is refused.
func (w *Workspace) folder(name string) (*os.Root, error) {
	fr, err := w.dir.OpenRoot(name)
	if err != nil {
		return nil, failed("open", name+"/", err)
	}
	// Compare what was opened with what is there, after the open: a folder
	// swapped for a link before it is caught, one swapped after is not used.
	fi, err := w.dir.Lstat(name)
	if err == nil && fi.IsDir() {
		var st fs.FileInfo
		if st, err = fr.Stat("."); err == nil && os.SameFile(fi, st) {
			return fr, nil
		}
	}
	fr.Close()
	return nil, fmt.Errorf("open %s/: %w: %s is not a folder of the workspace", name, ErrOutside, name)
}

// OpenIn opens the regular file rel of the top-level folder (Input or
// Output; rel relative to it, slash-separated) for reading, for a reader
// outside the sandbox such as the task API. It goes through a root opened
// on the folder itself, so a symlink in it may lead elsewhere inside the
// folder but never out of it: not to logs/, not out of the workspace
// (ErrOutside). A rel that is not a clean relative path ("..", a leading
// "/", an empty element) is refused with ErrOutside; anything but a
// regular file with ErrNotRegular or ErrIsDir, as OpenRead does.
func (w *Workspace) OpenIn(folder, rel string) (*os.File, fs.FileInfo, error) {
	name := folder + "/" + rel
	if folder != Input && folder != Output {
		return nil, nil, fmt.Errorf("open %s: %w: only input/ and output/ are readable this way", name, ErrOutside)
	}
	if !fs.ValidPath(rel) || rel == "." {
		return nil, nil, fmt.Errorf("open %s: %w: not a clean path inside %s/", name, ErrOutside, folder)
	}
	fr, err := w.folder(folder)
	if err != nil {
		return nil, nil, err
	}
	defer fr.Close()
	f, err := fr.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	return regular(name, f, failed("open", name, err))
}

// logPath returns rel, which must lie under logs/, relative to logs/.
func logPath(rel string) (string, error) {
	inside, ok := strings.CutPrefix(path.Clean(rel), Logs+"/")
	if !ok || !fs.ValidPath(inside) || inside == "." || strings.IndexByte(rel, 0) >= 0 {
		return "", fmt.Errorf("engine record %q: not a path under logs/", rel)
	}
	return inside, nil
}

// target checks rel with Resolve (ResolveWrite when write) and returns it as
// a path for the root: clean, slash-separated, the symlinks met on the way
// expanded, "." for the root.
func (w *Workspace) target(rel string, write bool) (string, error) {
	resolve := w.Resolve
	if write {
		resolve = w.ResolveWrite
	}
	p, err := resolve(rel)
	if err != nil {
		return "", err
	}
	r := w.Rel(p)
	if r == p { // cannot happen: Resolve returns paths inside
		return "", fmt.Errorf("resolve %q: %w", rel, ErrOutside)
	}
	return r, nil
}

// regular finishes an open: it refuses anything but a regular file, closing
// it. A named pipe opened for writing with no reader fails with ENXIO
// instead of blocking, and is refused the same way.
func regular(rel string, f *os.File, err error) (*os.File, fs.FileInfo, error) {
	if err != nil {
		switch {
		case errors.Is(err, syscall.ENXIO):
			return nil, nil, fmt.Errorf("%s is a named pipe or socket: %w", rel, ErrNotRegular)
		case errors.Is(err, syscall.EISDIR):
			return nil, nil, fmt.Errorf("%s %w", rel, ErrIsDir)
		}
		return nil, nil, failed("open", rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("open %s: %w", rel, err)
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		return f, fi, nil
	case m.IsDir():
		f.Close()
		return nil, nil, fmt.Errorf("%s %w", rel, ErrIsDir)
	default:
		f.Close()
		return nil, nil, fmt.Errorf("%s is %s: %w", rel, kind(m), ErrNotRegular)
	}
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "a special file"
}

// errEscapes is the text of os.Root's error for a path that leads out of
// the root (the error value itself is not exported).
const errEscapes = "path escapes from parent"

// failed describes the error err of op on rel in workspace terms: an
// os.Root error for a path that leads out wraps ErrOutside, and the
// *fs.PathError of the root (which names the expanded path) is replaced by
// rel. It returns nil when err is nil.
func failed(op, rel string, err error) error {
	if err == nil {
		return nil
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := e.(*fs.PathError); !ok && e.Error() == errEscapes {
			return fmt.Errorf("%s %s: %w: a symlink leads out of it", op, rel, ErrOutside)
		}
	}
	for {
		pe, ok := err.(*fs.PathError)
		if !ok {
			break
		}
		err = pe.Err
	}
	return fmt.Errorf("%s %s: %w", op, rel, err)
}

// maxName caps a file name made by SafeName, in bytes (file systems allow
// 255).
const maxName = 200

// SafeName turns a name from outside (an attachment's) into one file name
// for a folder of the workspace: only its last path element is kept
// (backslashes count as separators), control characters and invalid UTF-8
// become "_", and it is cut to maxName bytes with its extension kept. A
// name with nothing left, or "." or "..", becomes fallback.
func SafeName(name, fallback string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	name = name[strings.LastIndexByte(name, '/')+1:]
	name = strings.ToValidUTF8(name, "_")
	name = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '_'
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "" || name == "." || name == ".." {
		return fallback
	}
	if len(name) <= maxName {
		return name
	}
	ext := path.Ext(name)
	if len(ext) > 16 {
		ext = ""
	}
	stem := name[:maxName-len(ext)]
	for len(stem) > 0 && !utf8.ValidString(stem) {
		stem = stem[:len(stem)-1]
	}
	return stem + ext
}
