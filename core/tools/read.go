package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/workspace"
)

// DefaultReadLimit is how many lines Read returns when limit is not given.
const DefaultReadLimit = 2000

// Read returns a text file's lines numbered like `cat -n`, cut to the
// budget on line boundaries (on character boundaries when a line alone is
// too long), with a note telling how to read on.
type Read struct{}

type readArgs struct {
	Path       string `json:"path"`
	Offset     int    `json:"offset"`
	Limit      int    `json:"limit"`
	ByteOffset int64  `json:"byte_offset"`
}

// Name implements Tool.
func (Read) Name() string { return "Read" }

// Description implements Tool.
func (Read) Description(tx *catalog.Texts) string { return tx.Text("tools.read.description") }

// Schema implements Tool.
func (Read) Schema(tx *catalog.Texts) json.RawMessage {
	return schema(tx, "read", `{"type":"object","properties":{`+
		`"path":{"type":"string","description":$path},`+
		`"offset":{"type":"integer","minimum":1,"description":$offset},`+
		`"limit":{"type":"integer","minimum":1,"description":$limit},`+
		`"byte_offset":{"type":"integer","minimum":0,"description":$byte_offset}},`+
		`"required":["path"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t Read) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a readArgs
	if err := decode(raw, &a); err != nil {
		return env.fail(t.Name(), "", err)
	}
	res, err := t.read(env, a)
	if err != nil {
		return env.fail(t.Name(), a.Path, err)
	}
	return res
}

// readWindow is the part of a file Read looked at.
type readWindow struct {
	data      []byte  // raw bytes of the lines kept (at most limit lines)
	lines     []int64 // file offset of each line's first byte
	firstLine int     // number of the first line
	eof       bool    // nothing follows data
}

func (t Read) read(env *Env, a readArgs) (Result, error) {
	if a.Path == "" {
		return Result{}, fault("tools.err.path_required")
	}
	if a.Offset < 0 || a.Limit < 0 || a.ByteOffset < 0 {
		return Result{}, fault("tools.read.negative")
	}
	if a.Offset == 0 {
		a.Offset = 1
	}
	if a.Limit == 0 {
		a.Limit = DefaultReadLimit
	}
	f, fi, err := env.WS.OpenRead(a.Path)
	if errors.Is(err, workspace.ErrIsDir) {
		return Result{}, fault("tools.read.is_dir", "path", quote(a.Path), "pattern", strconv.Quote(strings.TrimSuffix(a.Path, "/")+"/**"))
	}
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	switch strings.ToLower(path.Ext(a.Path)) {
	case ".docx", ".xlsx", ".pptx", ".pdf":
		return Result{}, fault("tools.read.document", "path", quote(a.Path))
	}
	budget := env.budget()
	c := env.counter()
	w, err := readLines(f, a, max(budget*bytesPerTokenCap, 4096))
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w", a.Path, err) // an I/O error
	}
	if len(w.data) == 0 {
		if fi.Size() == 0 {
			return Result{Text: env.say("tools.read.empty")}, nil
		}
		if a.ByteOffset > 0 {
			return Result{}, fault("tools.read.past_end_bytes", "offset", itoa(a.ByteOffset), "path", quote(a.Path), "size", itoa(fi.Size()))
		}
		return Result{}, fault("tools.read.past_end_lines", "offset", itoa(a.Offset), "path", quote(a.Path), "lines", itoa(w.firstLine-1))
	}
	if isBinary(w.data) {
		return Result{}, fault("tools.read.binary", "path", quote(a.Path))
	}

	// Number the lines, remembering where each numbered line starts so a
	// cut can be mapped back to a line or a byte of the file.
	var sb strings.Builder
	starts := make([]int, len(w.lines))  // offset of each numbered line in the text
	content := make([]int, len(w.lines)) // offset of its content (after the number)
	for i := range w.lines {
		lo := int(w.lines[i] - w.lines[0])
		hi := len(w.data)
		if i+1 < len(w.lines) {
			hi = int(w.lines[i+1] - w.lines[0])
		}
		line := strings.TrimSuffix(string(w.data[lo:hi]), "\n")
		starts[i] = sb.Len()
		fmt.Fprintf(&sb, "%6d\t", w.firstLine+i)
		content[i] = sb.Len()
		sb.WriteString(displayable(line))
		sb.WriteByte('\n')
	}
	text := sb.String()
	last := w.firstLine + len(w.lines) - 1
	size := fi.Size()

	cutNote := func(kept int) string {
		// i is the line the cut falls in: the last one starting at or
		// before kept.
		i := sort.Search(len(starts), func(j int) bool { return starts[j] > kept }) - 1
		if kept >= len(text) || kept <= content[i] {
			// On a line boundary (or inside a line number): whole lines
			// were shown.
			next := w.firstLine + i
			if kept >= len(text) {
				next = last + 1
			}
			return "\n" + env.say("tools.read.cut_lines", "from", itoa(w.firstLine), "to", itoa(next-1), "path", a.Path, "next", itoa(next))
		}
		raw := rawLen(w.data[w.lines[i]-w.lines[0]:], kept-content[i])
		at := w.lines[i] + int64(raw)
		return "\n" + env.say("tools.read.cut_inside", "line", itoa(w.firstLine+i), "path", a.Path, "at", itoa(at), "size", itoa(size))
	}
	if w.eof {
		out, _ := head(text, budget, c, cutNote)
		return Result{Text: out}, nil
	}
	more := env.say("tools.read.more", "from", itoa(w.firstLine), "to", itoa(last), "path", a.Path, "next", itoa(last+1))
	out, cut := head(text, budget-c.Count(more), c, cutNote)
	if !cut {
		out += more
	}
	return Result{Text: out}, nil
}

// readLines skips to the requested line or byte and reads at most a.Limit
// lines and windowCap bytes.
func readLines(f *os.File, a readArgs, windowCap int) (readWindow, error) {
	w := readWindow{firstLine: 1}
	var pos int64
	if a.ByteOffset > 0 {
		// Count the lines before byte_offset so the output stays numbered.
		n, err := countLines(io.LimitReader(f, a.ByteOffset))
		if err != nil {
			return w, err
		}
		w.firstLine = n + 1
		if _, err := f.Seek(a.ByteOffset, io.SeekStart); err != nil {
			return w, err
		}
		pos = a.ByteOffset
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if a.ByteOffset == 0 {
		for w.firstLine < a.Offset {
			chunk, err := br.ReadSlice('\n')
			pos += int64(len(chunk))
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				if len(chunk) > 0 {
					w.firstLine++ // a last line without a newline
				}
				w.eof = true
				return w, nil
			}
			if err != nil {
				return w, err
			}
			w.firstLine++
		}
	}
	buf := make([]byte, windowCap+1)
	n, err := io.ReadFull(br, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return w, err
	}
	buf = buf[:n]
	more := n > windowCap
	if more {
		buf = buf[:windowCap]
	}
	end := 0
	for end < len(buf) && len(w.lines) < a.Limit {
		w.lines = append(w.lines, pos+int64(end))
		i := bytes.IndexByte(buf[end:], '\n')
		if i < 0 {
			end = len(buf)
			break
		}
		end += i + 1
	}
	w.data = buf[:end]
	w.eof = !more && end == len(buf)
	return w, nil
}

func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 64<<10)
	n := 0
	for {
		k, err := r.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}

// displayable replaces each invalid UTF-8 byte with U+FFFD, one for one, so
// rawLen can map a cut in the text back to the file.
func displayable(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.WriteString(s[i : i+n])
		}
		i += n
	}
	return sb.String()
}

// rawLen returns how many bytes of raw the first shown bytes of
// displayable(raw) stand for.
func rawLen(raw []byte, shown int) int {
	i, d := 0, 0
	for i < len(raw) && d < shown {
		r, n := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && n == 1 {
			d += utf8.RuneLen(utf8.RuneError)
		} else {
			d += n
		}
		i += n
	}
	return i
}

// unwrapPath drops the absolute path from an *os.PathError so that results
// speak in workspace-relative paths.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// itoa formats a number for a text.
func itoa[T int | int64](n T) string { return strconv.FormatInt(int64(n), 10) }
