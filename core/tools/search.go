package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/baton-bot/baton/core/catalog"
)

// Search limits.
const (
	// DefaultSearchTimeout is how long one Glob or Grep call may search;
	// then it returns what it found so far, saying it stopped.
	DefaultSearchTimeout = 30 * time.Second

	maxGlobResults = 500
	maxGrepMatches = 500
	maxGrepContext = 20
	maxGrepLine    = 400       // characters of one output line
	maxGrepFile    = 16 << 20  // larger files are skipped
	maxGrepBytes   = 512 << 20 // bytes of files read by one Grep call
	maxWalk        = 200000    // entries visited by one search
	grepCheckLines = 256       // lines matched between checks of the context
)

var (
	errWalkLimit = errors.New("walk limit reached")
	errReadLimit = errors.New("read limit reached")
)

// Glob lists workspace paths matching a pattern with `**`, sorted, capped.
// It never follows symlinks out of the path written before the first
// wildcard, which Resolve confines. It stops at Timeout (default
// DefaultSearchTimeout) with what it found, and returns promptly when the
// call's context ends.
type Glob struct {
	Timeout time.Duration
}

type globArgs struct {
	Pattern string `json:"pattern"`
}

// Name implements Tool.
func (Glob) Name() string { return "Glob" }

// Description implements Tool.
func (Glob) Description(tx *catalog.Texts) string { return tx.Text("tools.glob.description") }

// Schema implements Tool.
func (Glob) Schema(tx *catalog.Texts) json.RawMessage {
	return schema(tx, "glob", `{"type":"object","properties":{`+
		`"pattern":{"type":"string","description":$pattern}},`+
		`"required":["pattern"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t Glob) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a globArgs
	if err := decode(raw, &a); err != nil {
		return env.fail(t.Name(), "", err)
	}
	sctx, cancel := context.WithTimeout(ctx, searchTimeout(t.Timeout))
	defer cancel()
	matches, more, err := glob(sctx, env, a.Pattern)
	stopped := timedOut(ctx, err)
	if err != nil && !stopped {
		return env.fail(t.Name(), globBase(a.Pattern), err)
	}
	if len(matches) == 0 && !stopped {
		return Result{Text: env.say("tools.glob.none", "pattern", a.Pattern)}
	}
	text := strings.Join(matches, "\n")
	switch {
	case stopped:
		text += "\n" + env.say("tools.glob.stopped", "limit", seconds(env.texts(), searchTimeout(t.Timeout)))
	case more > 0:
		text += "\n" + env.say("tools.glob.more", "n", itoa(more))
	}
	text = strings.TrimPrefix(text, "\n")
	out, _ := head(text, env.budget(), env.counter(), func(kept int) string {
		return "\n" + env.say("tools.glob.cut")
	})
	return Result{Text: out}
}

func glob(ctx context.Context, env *Env, pattern string) ([]string, int, error) {
	if pattern == "" {
		return nil, 0, fault("tools.err.pattern_required")
	}
	if strings.HasPrefix(pattern, "/") {
		return nil, 0, fault("tools.glob.absolute")
	}
	pattern = path.Clean(pattern)
	if !doublestar.ValidatePattern(pattern) {
		return nil, 0, fault("tools.glob.invalid", "pattern", strconv.Quote(pattern))
	}
	base, rest := doublestar.SplitPattern(pattern)
	if _, err := env.WS.Resolve(base); err != nil {
		return nil, 0, err
	}
	show := func(rel string) string {
		if base == "." {
			return rel
		}
		return path.Join(base, rel)
	}
	if rest == "" || rest == "." {
		fi, err := env.WS.Stat(base)
		if err != nil {
			return nil, 0, nil
		}
		p := pattern
		if fi.IsDir() {
			p += "/"
		}
		return []string{p}, 0, nil
	}
	depth := -1 // unlimited with **
	if !strings.Contains(rest, "**") {
		depth = strings.Count(rest, "/") + 1
	}
	var matches []string
	more, visited := 0, 0
	dir := "" // the walk's root as Walk names it
	err := env.WS.Walk(base, func(p string, d fs.DirEntry, err error) error {
		if dir == "" {
			dir = p
		}
		if err != nil {
			if p == dir {
				if errors.Is(err, fs.ErrNotExist) {
					return fs.SkipAll
				}
				return err
			}
			return nil // unreadable entry: skip it
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if visited++; visited > maxWalk {
			return errWalkLimit
		}
		if p == dir {
			return nil
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if dir == "." {
			rel = p
		}
		if d.IsDir() && depth > 0 && strings.Count(rel, "/")+1 > depth {
			return fs.SkipDir
		}
		if !doublestar.MatchUnvalidated(rest, rel) {
			return nil
		}
		if len(matches) >= maxGlobResults {
			more++
			return nil
		}
		s := show(rel)
		if d.IsDir() {
			s += "/"
		}
		matches = append(matches, s)
		return nil
	})
	if errors.Is(err, errWalkLimit) {
		more++ // at least one more was not looked at
		err = nil
	}
	return matches, more, err // Walk visits in lexical order
}

// Grep searches file contents with an RE2 regular expression and prints
// `path:line:text` (context lines as `path-line-text`). It reads only
// regular files of at most 16 MB (never following a symlink, never blocking
// on a FIFO or device), at most 512 MB in all; it stops at Timeout (default
// DefaultSearchTimeout) with what it found, and returns promptly when the
// call's context ends, checking it between files and within long ones.
type Grep struct {
	Timeout time.Duration
}

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	IgnoreCase bool   `json:"ignore_case"`
	Context    int    `json:"context"`
}

// Name implements Tool.
func (Grep) Name() string { return "Grep" }

// Description implements Tool.
func (Grep) Description(tx *catalog.Texts) string { return tx.Text("tools.grep.description") }

// Schema implements Tool.
func (Grep) Schema(tx *catalog.Texts) json.RawMessage {
	return schema(tx, "grep", `{"type":"object","properties":{`+
		`"pattern":{"type":"string","description":$pattern},`+
		`"path":{"type":"string","description":$path},`+
		`"glob":{"type":"string","description":$glob},`+
		`"ignore_case":{"type":"boolean","description":$ignore_case},`+
		`"context":{"type":"integer","minimum":0,"maximum":20,"description":$context}},`+
		`"required":["pattern"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t Grep) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a grepArgs
	if err := decode(raw, &a); err != nil {
		return env.fail(t.Name(), "", err)
	}
	sctx, cancel := context.WithTimeout(ctx, searchTimeout(t.Timeout))
	defer cancel()
	text, err := grep(sctx, env, a)
	if timedOut(ctx, err) {
		text = strings.TrimPrefix(text+"\n"+env.say("tools.grep.stopped", "limit", seconds(env.texts(), searchTimeout(t.Timeout))), "\n")
	} else if err != nil {
		return env.fail(t.Name(), a.Path, err)
	}
	out, _ := head(text, env.budget(), env.counter(), func(kept int) string {
		return "\n" + env.say("tools.grep.cut")
	})
	return Result{Text: out}
}

func grep(ctx context.Context, env *Env, a grepArgs) (string, error) {
	if a.Pattern == "" {
		return "", fault("tools.err.pattern_required")
	}
	expr := a.Pattern
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", fault("tools.grep.invalid_pattern", "err", err.Error())
	}
	if a.Glob != "" && !doublestar.ValidatePattern(a.Glob) {
		return "", fault("tools.grep.invalid_glob", "glob", strconv.Quote(a.Glob))
	}
	a.Context = min(max(a.Context, 0), maxGrepContext)
	fi, err := env.WS.Stat(a.Path)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		_, _, err := env.WS.OpenRead(a.Path) // says what it is
		return "", err
	}
	var out strings.Builder
	matches, visited, read := 0, 0, int64(0)
	root := ""
	err = env.WS.Walk(a.Path, func(p string, d fs.DirEntry, err error) error {
		if root == "" {
			root = p
		}
		if err != nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if visited++; visited > maxWalk {
			return errWalkLimit
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != root {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks are not followed
		}
		rel := p
		if a.Glob != "" {
			name := rel
			if !strings.Contains(a.Glob, "/") {
				name = path.Base(rel)
			}
			if !doublestar.MatchUnvalidated(a.Glob, name) {
				return nil
			}
		}
		if read >= maxGrepBytes {
			return errReadLimit
		}
		b, ok := readSmall(env, p, min(maxGrepFile, maxGrepBytes-read))
		read += int64(len(b))
		if !ok || isBinary(b) {
			return nil
		}
		n, err := grepFile(ctx, &out, rel, b, re, a.Context, maxGrepMatches-matches)
		matches += n
		if err != nil {
			return err
		}
		if matches >= maxGrepMatches {
			return errWalkLimit
		}
		return nil
	})
	if err != nil && !errors.Is(err, errWalkLimit) && !errors.Is(err, errReadLimit) {
		return strings.TrimSuffix(out.String(), "\n"), err
	}
	if matches == 0 {
		if errors.Is(err, errReadLimit) {
			return env.say("tools.grep.none_read_limit", "pattern", a.Pattern, "mb", itoa(maxGrepBytes>>20)), nil
		}
		return env.say("tools.grep.none", "pattern", a.Pattern), nil
	}
	switch {
	case errors.Is(err, errReadLimit):
		out.WriteString(env.say("tools.grep.read_limit", "mb", itoa(maxGrepBytes>>20)))
	case errors.Is(err, errWalkLimit):
		out.WriteString(env.say("tools.grep.match_limit", "n", itoa(matches)))
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// grepFile writes up to limit matches of re in b with ctxLines of context
// and returns how many it wrote; it stops with ctx's error when ctx ends.
func grepFile(ctx context.Context, out *strings.Builder, rel string, b []byte, re *regexp.Regexp, ctxLines, limit int) (int, error) {
	lines := strings.Split(string(b), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	n := 0
	printed := -1 // last line index printed
	for i, line := range lines {
		if n >= limit {
			break
		}
		if i%grepCheckLines == grepCheckLines-1 && ctx.Err() != nil {
			return n, ctx.Err()
		}
		if !re.MatchString(line) {
			continue
		}
		n++
		from := max(i-ctxLines, printed+1)
		if ctxLines > 0 && printed >= 0 && from > printed+1 {
			out.WriteString("--\n")
		}
		for j := from; j <= i+ctxLines && j < len(lines); j++ {
			if j <= printed {
				continue
			}
			sep := "-"
			if re.MatchString(lines[j]) && j <= i {
				sep = ":"
			}
			if j > i && re.MatchString(lines[j]) {
				break // the next match prints itself with its own context
			}
			fmt.Fprintf(out, "%s%s%d%s%s\n", rel, sep, j+1, sep, clip(lines[j]))
			printed = j
		}
	}
	return n, nil
}

// clip shortens a line for display, on a rune boundary.
func clip(s string) string {
	s = strings.TrimSuffix(s, "\r")
	if len(s) <= maxGrepLine {
		return displayable(s)
	}
	n := maxGrepLine
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return displayable(s[:n]) + "…"
}

// globBase is the part of a pattern before its first wildcard: the path
// an error about the pattern is about.
func globBase(pattern string) string {
	base, _ := doublestar.SplitPattern(path.Clean(pattern))
	return base
}

// searchTimeout is a Glob or Grep call's time limit.
func searchTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultSearchTimeout
	}
	return d
}

// timedOut reports whether err is the search's own time limit rather than
// the call's context ending (an abort), which stays an error.
func timedOut(call context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && call.Err() == nil
}

// readSmall reads the regular file rel of the workspace if it has at most
// max bytes. The open is confined and never blocks (a FIFO or device
// swapped in after the walk saw a file is refused), and the size is checked
// on the open file; ok is false for anything it did not read whole.
func readSmall(env *Env, rel string, max int64) (b []byte, ok bool) {
	f, fi, err := env.WS.OpenRead(rel)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, false
	}
	b, err = io.ReadAll(io.LimitReader(f, max+1))
	if err != nil || int64(len(b)) > max {
		return nil, false // it grew
	}
	return b, true
}
