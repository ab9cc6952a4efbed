package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func numbered(from, to int, line func(int) string) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%6d\t%s\n", i, line(i))
	}
	return b.String()
}

func TestRead(t *testing.T) {
	env := newEnv(t)
	line := func(i int) string { return "line " + strconv.Itoa(i) }
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		b.WriteString(line(i) + "\n")
	}
	put(t, env, "input/ten.txt", []byte(b.String()))
	put(t, env, "input/empty.txt", nil)
	put(t, env, "input/nonl.txt", []byte("a\nb"))

	tests := []struct {
		name string
		args obj
		want string
	}{
		{"whole file", obj{"path": "input/ten.txt"}, numbered(1, 10, line)},
		{"offset", obj{"path": "input/ten.txt", "offset": 9}, numbered(9, 10, line)},
		{"offset and limit", obj{"path": "input/ten.txt", "offset": 3, "limit": 2},
			numbered(3, 4, line) + "[showed lines 3–4 of input/ten.txt; more follows: read on with offset=5]"},
		{"byte_offset", obj{"path": "input/ten.txt", "byte_offset": len("line 1\nline 2\nli")},
			fmt.Sprintf("%6d\tne 3\n", 3) + numbered(4, 10, line)},
		{"empty", obj{"path": "input/empty.txt"}, "(empty file)"},
		{"no final newline", obj{"path": "input/nonl.txt"}, "     1\ta\n     2\tb\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ok(t, call(t, Read{}, env, tt.args))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	for name, args := range map[string]obj{
		"directory":      {"path": "input"},
		"missing":        {"path": "input/nope.txt"},
		"past the end":   {"path": "input/ten.txt", "offset": 50},
		"unknown field":  {"path": "input/ten.txt", "lines": 3},
		"no path":        {},
		"negative limit": {"path": "input/ten.txt", "limit": -1},
	} {
		t.Run(name, func(t *testing.T) { failed(t, call(t, Read{}, env, args)) })
	}
	t.Run("binary", func(t *testing.T) {
		put(t, env, "input/bin.dat", []byte("ab\x00cd"))
		if msg := failed(t, call(t, Read{}, env, obj{"path": "input/bin.dat"})); !strings.Contains(msg, "binary") {
			t.Errorf("message %q does not say binary", msg)
		}
	})
}

var offsetHint = regexp.MustCompile(`Read on with offset=(\d+)`)
var byteHint = regexp.MustCompile(`Read on with byte_offset=(\d+)`)

// TestReadCutOnLines reads a long file page by page following the hints:
// every line is seen exactly once, in order.
func TestReadCutOnLines(t *testing.T) {
	env := newEnv(t)
	var b strings.Builder
	const n = 3000
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "record %d: some words to make the line longer\n", i)
	}
	put(t, env, "input/long.txt", []byte(b.String()))
	next, pages := 1, 0
	for next <= n {
		pages++
		got := ok(t, call(t, Read{}, env, obj{"path": "input/long.txt", "offset": next, "limit": n}))
		if c := env.Tokens.Count(got); c > env.TokenizerBudget {
			t.Fatalf("page %d has %d tokens, budget %d", pages, c, env.TokenizerBudget)
		}
		body := got
		if m := offsetHint.FindStringSubmatch(got); m != nil {
			body = got[:strings.LastIndex(got, "\n[Read cut")]
			if !strings.Contains(got, "Grep") {
				t.Errorf("cut note without the Grep hint: %q", got[len(body):])
			}
			for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), strconv.Itoa(next)+"\t") {
					t.Fatalf("page %d: line %q, want number %d", pages, l, next)
				}
				next++
			}
			if hint, _ := strconv.Atoi(m[1]); hint != next {
				t.Fatalf("hint offset=%d, want %d", hint, next)
			}
			continue
		}
		if !strings.HasSuffix(body, fmt.Sprintf("record %d: some words to make the line longer\n", n)) {
			t.Fatalf("last page does not end with the last line: %q", body[max(0, len(body)-100):])
		}
		break
	}
	if pages < 3 {
		t.Errorf("read in %d pages; the file should not fit the minimum budget", pages)
	}
}

// TestReadCutInsideLine follows byte_offset hints through a file that is a
// single long line, and reassembles it exactly.
func TestReadCutInsideLine(t *testing.T) {
	env := newEnv(t)
	content := strings.Repeat("ünïcödé words, 日本語 too; ", 2500) // ~70 kB, no newline
	put(t, env, "input/one.json", []byte(content))
	var got strings.Builder
	off := 0
	for pages := 0; ; pages++ {
		if pages > 50 {
			t.Fatal("no progress")
		}
		res := ok(t, call(t, Read{}, env, obj{"path": "input/one.json", "byte_offset": off}))
		if c := env.Tokens.Count(res); c > env.TokenizerBudget {
			t.Fatalf("%d tokens, budget %d", c, env.TokenizerBudget)
		}
		_, text, _ := strings.Cut(res, "\t") // drop the line number
		m := byteHint.FindStringSubmatch(res)
		if m == nil {
			got.WriteString(strings.TrimSuffix(text, "\n"))
			break
		}
		text = text[:strings.Index(text, "\n[Read cut")]
		got.WriteString(text)
		next, _ := strconv.Atoi(m[1])
		if next != off+len(text) {
			t.Fatalf("hint byte_offset=%d, want %d", next, off+len(text))
		}
		off = next
	}
	if got.String() != content {
		t.Errorf("reassembled %d bytes, want %d", got.Len(), len(content))
	}
}

func TestWrite(t *testing.T) {
	env := newEnv(t)
	ok(t, call(t, Write{}, env, obj{"path": "output/deep/new/report.md", "content": "# Report\n"}))
	b, err := os.ReadFile(filepath.Join(env.WS.Root(), "output/deep/new/report.md"))
	if err != nil || string(b) != "# Report\n" {
		t.Fatalf("file: %q, %v", b, err)
	}
	failed(t, call(t, Write{}, env, obj{"path": "logs/forged.jsonl", "content": "x"}))
	if _, err := os.Stat(filepath.Join(env.WS.Root(), "logs/forged.jsonl")); err == nil {
		t.Error("Write created a file in logs/")
	}
	failed(t, call(t, Write{}, env, obj{"path": "output", "content": "x"}))
}

func TestEdit(t *testing.T) {
	tests := []struct {
		name    string
		args    obj
		want    string // file afterwards
		wantErr string
	}{
		{"unique", obj{"old_string": "beta", "new_string": "BETA"}, "alpha BETA gamma gamma\n", ""},
		{"not found", obj{"old_string": "delta", "new_string": "x"}, "", "not found"},
		{"ambiguous", obj{"old_string": "gamma", "new_string": "x"}, "", "occurs 2 times"},
		{"replace_all", obj{"old_string": "gamma", "new_string": "G", "replace_all": true}, "alpha beta G G\n", ""},
		{"empty old", obj{"old_string": "", "new_string": "x"}, "", "Write"},
		{"same", obj{"old_string": "beta", "new_string": "beta"}, "", "same"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			p := put(t, env, "output/f.txt", []byte("alpha beta gamma gamma\n"))
			tt.args["path"] = "output/f.txt"
			res := call(t, Edit{}, env, tt.args)
			b, _ := os.ReadFile(p)
			if tt.wantErr != "" {
				if msg := failed(t, res); !strings.Contains(msg, tt.wantErr) {
					t.Errorf("error %q does not mention %q", msg, tt.wantErr)
				}
				if string(b) != "alpha beta gamma gamma\n" {
					t.Errorf("file changed on error: %q", b)
				}
				return
			}
			ok(t, res)
			if diff := cmp.Diff(tt.want, string(b)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	env := newEnv(t)
	put(t, env, "logs/lessons.jsonl", []byte("{}\n"))
	failed(t, call(t, Edit{}, env, obj{"path": "logs/lessons.jsonl", "old_string": "{}", "new_string": "[]"}))
}

func TestGlob(t *testing.T) {
	env := newEnv(t)
	for _, f := range []string{"input/a.csv", "input/sub/b.csv", "input/sub/deep/c.csv", "input/notes.txt", "output/d.csv"} {
		put(t, env, f, []byte("x"))
	}
	tests := []struct{ pattern, want string }{
		{"input/**/*.csv", "input/a.csv\ninput/sub/b.csv\ninput/sub/deep/c.csv"},
		{"**/*.csv", "input/a.csv\ninput/sub/b.csv\ninput/sub/deep/c.csv\noutput/d.csv"},
		{"input/*", "input/a.csv\ninput/notes.txt\ninput/sub/"},
		{"input/notes.txt", "input/notes.txt"},
		{"*.md", "No paths match *.md"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			got := ok(t, call(t, Glob{}, env, obj{"pattern": tt.pattern}))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("capped", func(t *testing.T) {
		env := newEnv(t)
		for i := range maxGlobResults + 25 {
			put(t, env, fmt.Sprintf("input/many/%04d.txt", i), nil)
		}
		env.TokenizerBudget = 20000
		got := ok(t, call(t, Glob{}, env, obj{"pattern": "input/many/*.txt"}))
		lines := strings.Split(got, "\n")
		if len(lines) != maxGlobResults+1 || lines[0] != "input/many/0000.txt" || !strings.Contains(got, "and 25 more") {
			t.Errorf("got %d lines ending %q", len(lines), lines[len(lines)-1])
		}
	})
	failed(t, call(t, Glob{}, env, obj{"pattern": "/etc/*"}))
	failed(t, call(t, Glob{}, env, obj{"pattern": "../*"}))
}

func TestGrep(t *testing.T) {
	env := newEnv(t)
	put(t, env, "input/app.log", []byte("start\nok 1\nERROR disk full\nok 2\nok 3\nok 4\nok 5\nerror again\nend\n"))
	put(t, env, "input/other.txt", []byte("no problem here\nan Error in text\n"))
	put(t, env, "input/blob.bin", []byte("ERROR\x00binary"))
	tests := []struct {
		name string
		args obj
		want string
	}{
		{"plain", obj{"pattern": "ERROR"}, "input/app.log:3:ERROR disk full"},
		{"ignore_case", obj{"pattern": "error", "ignore_case": true},
			"input/app.log:3:ERROR disk full\ninput/app.log:8:error again\ninput/other.txt:2:an Error in text"},
		{"context", obj{"pattern": "(?i)error", "path": "input/app.log", "context": 1},
			"input/app.log-2-ok 1\ninput/app.log:3:ERROR disk full\ninput/app.log-4-ok 2\n--\ninput/app.log-7-ok 5\ninput/app.log:8:error again\ninput/app.log-9-end"},
		{"glob", obj{"pattern": "(?i)error", "glob": "*.txt"}, "input/other.txt:2:an Error in text"},
		{"no match", obj{"pattern": "zebra"}, "No matches for zebra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ok(t, call(t, Grep{}, env, tt.args))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if msg := failed(t, call(t, Grep{}, env, obj{"pattern": "(unclosed"})); !strings.Contains(msg, "RE2") {
		t.Errorf("bad pattern message: %q", msg)
	}
}
