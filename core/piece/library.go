package piece

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// BuiltinPrefix marks the Source of a piece read from the built-in file
// system, so people can tell it from a file on disk.
const BuiltinPrefix = "builtin:"

// Library is the set of pieces Baton can run, by name. It is immutable after
// Load and safe for concurrent use.
type Library struct {
	pieces map[string]*Piece
	rules  Rules
}

// Load reads the built-in pieces — every pieces/*.yaml in builtin (nil for
// none), whose persona paths resolve inside builtin — and then every *.yaml
// and *.yml file in dir (pieces_dir). A file in dir replaces the built-in
// piece with the same name, or adds a new one. A missing dir, or "", is not
// an error.
//
// Every piece is validated against rules; when any is invalid Load returns a nil Library
// and every problem found (each an *Error, joined with errors.Join), so the
// bot refuses to start rather than fail a job later.
func Load(builtin fs.FS, dir string, rules Rules) (*Library, error) {
	lib := &Library{pieces: map[string]*Piece{}, rules: rules}
	var errs []error
	if builtin != nil {
		files, err := fs.Glob(builtin, "pieces/*.yaml")
		if err != nil {
			return nil, fmt.Errorf("load built-in pieces: %w", err)
		}
		for _, f := range files {
			src, err := fs.ReadFile(builtin, f)
			if err != nil {
				return nil, fmt.Errorf("load built-in piece %s: %w", f, err)
			}
			pc, line, err := parse(src, BuiltinPrefix+f, f, builtin, rules)
			if err != nil {
				errs = append(errs, flatten(err)...)
				continue
			}
			if prev, dup := lib.pieces[pc.Name]; dup {
				errs = append(errs, &Error{File: pc.Source, Line: line, Msg: fmt.Sprintf("piece %q is also defined in %s", pc.Name, prev.Source)})
				continue
			}
			lib.pieces[pc.Name] = pc
		}
	}
	files, err := pieceFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("load pieces from %s: %w", dir, err)
	}
	fromDir := map[string]string{}
	for _, f := range files {
		pc, line, err := parseFile(f, rules)
		if err != nil {
			errs = append(errs, flatten(err)...)
			continue
		}
		if prev, dup := fromDir[pc.Name]; dup {
			errs = append(errs, &Error{File: f, Line: line, Msg: fmt.Sprintf("piece %q is also defined in %s", pc.Name, prev)})
			continue
		}
		fromDir[pc.Name] = f
		lib.pieces[pc.Name] = pc
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return lib, nil
}

// pieceFiles lists the piece files in dir, sorted.
func pieceFiles(dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if ext := path.Ext(e.Name()); ext == ".yaml" || ext == ".yml" {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files, nil
}

// parseFile parses a piece file on disk. Errors name the file as given;
// persona paths resolve relative to the file's directory, wherever it is.
func parseFile(file string, rules Rules) (*Piece, int, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, 0, &Error{File: file, Msg: "cannot read: " + msg}
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, 0, &Error{File: file, Msg: fmt.Sprintf("cannot resolve path: %v", err)}
	}
	// Root the file system at the volume so persona paths may climb out of
	// the piece's directory (../personas/x.md) as the format allows.
	root := filepath.VolumeName(abs) + string(filepath.Separator)
	rel := filepath.ToSlash(strings.TrimPrefix(abs, root))
	return parse(src, file, rel, os.DirFS(root), rules)
}

// Lookup returns the piece called name.
func (l *Library) Lookup(name string) (*Piece, bool) {
	pc, ok := l.pieces[name]
	return pc, ok
}

// Names returns the names of every piece, sorted.
func (l *Library) Names() []string {
	names := make([]string, 0, len(l.pieces))
	for n := range l.pieces {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Validate parses each piece file on disk with the rules the library was
// loaded with and returns every problem found, one error per problem, each
// an *Error printing as "file:line: message". It returns nil when all files
// are valid. (Load has already validated the built-in pieces and pieces_dir.)
func (l *Library) Validate(files []string) []error {
	var errs []error
	for _, f := range files {
		if _, _, err := parseFile(f, l.rules); err != nil {
			errs = append(errs, flatten(err)...)
		}
	}
	return errs
}

// flatten lists the errors joined in err.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
