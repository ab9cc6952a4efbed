package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-bot/baton/core/tokens"
	"github.com/baton-bot/baton/core/workspace"
)

func TestBudget(t *testing.T) {
	tests := []struct {
		name                     string
		window, cur, out, maxRes int
		factor                   float64
		want                     int
	}{
		{"half of available", 100000, 20000, 4000, 60000, 1, 38000},
		{"capped", 400000, 0, 0, 60000, 1, 60000},
		{"default cap", 400000, 0, 0, 0, 1, DefaultMaxResultTokens},
		{"no factor is 1", 100000, 20000, 4000, 60000, 0, 38000},
		{"floor", 100000, 95000, 4000, 60000, 1, MinBudget},
		{"the floor gives way to half the room", 100000, 97000, 4000, 60000, 1, 1500},
		{"over the window", 100000, 120000, 4000, 60000, 1, 1},
		// The model counts twice the tokenizer's tokens: the budget in
		// tokenizer tokens is half, so that the result takes as much of
		// the window as the ladder allows, not twice as much.
		{"corrected", 100000, 20000, 4000, 60000, 2, 19000},
		{"corrected cap", 400000, 0, 0, 60000, 2, 30000},
		{"corrected floor", 100000, 95000, 4000, 60000, 2, MinBudget / 2},
		{"model counts fewer", 100000, 20000, 4000, 60000, 0.5, 76000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Budget(tt.window, tt.cur, tt.out, tt.maxRes, tt.factor); got != tt.want {
				t.Errorf("Budget = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	c := tokens.Default()
	var lines strings.Builder
	for i := range 3000 {
		lines.WriteString(strings.Repeat("word ", i%7+1) + "end\n")
	}
	manyLines := lines.String()
	oneLine := strings.Repeat("日本語のテキストと English words mixed; ", 3000)

	t.Run("fits unchanged", func(t *testing.T) {
		got, cut := Truncate("hello\nworld\n", 100, Head, c, nil)
		if cut || got != "hello\nworld\n" {
			t.Errorf("got %q, %v", got, cut)
		}
	})
	t.Run("head on a line boundary", func(t *testing.T) {
		got, cut := Truncate(manyLines, 500, Head, c, nil)
		if !cut || c.Count(got) > 500 {
			t.Fatalf("cut=%v tokens=%d", cut, c.Count(got))
		}
		body, note, found := strings.Cut(got, "\n[output cut")
		if !found || !strings.HasPrefix(manyLines, body) || !strings.HasSuffix(body, "end\n") {
			t.Errorf("body should be whole lines from the start, note %q", note)
		}
		if c.Count(body) < 400 {
			t.Errorf("kept only %d tokens of 500", c.Count(body))
		}
	})
	t.Run("head inside a long line, UTF-8 safe", func(t *testing.T) {
		got, cut := Truncate(oneLine, 300, Head, c, nil)
		if !cut || c.Count(got) > 300 || !utf8.ValidString(got) {
			t.Fatalf("cut=%v tokens=%d valid=%v", cut, c.Count(got), utf8.ValidString(got))
		}
		body, _, _ := strings.Cut(got, "\n[output cut")
		if len(body) < 200 || !strings.HasPrefix(oneLine, body) {
			t.Errorf("kept %d bytes; want a long prefix of the line", len(body))
		}
	})
	t.Run("head and tail", func(t *testing.T) {
		text := "FIRST LINE\n" + manyLines + "LAST LINE\n"
		got, cut := Truncate(text, 600, HeadTail, c, nil)
		if !cut || c.Count(got) > 600 {
			t.Fatalf("cut=%v tokens=%d", cut, c.Count(got))
		}
		if !strings.HasPrefix(got, "FIRST LINE\n") || !strings.HasSuffix(got, "LAST LINE\n") || !strings.Contains(got, "bytes cut from the middle") {
			t.Errorf("want head, note and tail; got %q … %q", got[:40], got[len(got)-40:])
		}
	})
}

func FuzzTruncate(f *testing.F) {
	f.Add("hello\nworld\n", uint16(3), false)
	f.Add(strings.Repeat("línea ñ 日本\n", 200), uint16(50), true)
	f.Add(strings.Repeat("x", 5000), uint16(10), false)
	f.Add("\xff\xfe invalid \xc3", uint16(2), true)
	f.Add(strings.Repeat("\n", 1000), uint16(0), true)
	c := tokens.Default()
	f.Fuzz(func(t *testing.T, text string, budget uint16, tail bool) {
		b := int(budget % 4000)
		mode := Head
		if tail {
			mode = HeadTail
		}
		got, cut := Truncate(text, b, mode, c, nil)
		if n := c.Count(got); n > b {
			t.Fatalf("result has %d tokens, budget %d", n, b)
		}
		if utf8.ValidString(text) && !utf8.ValidString(got) {
			t.Fatalf("valid input gave invalid UTF-8: %q", got)
		}
		if !cut && got != text {
			t.Fatalf("not cut but changed: %q", got)
		}
		if cut && len(text) <= b && c.Count(text) <= b {
			t.Fatalf("cut although the text fits")
		}
	})
}

// TestFitResult: a result that fits is returned whole; a longer one keeps
// its head and tail within the budget and names the file under logs/
// that keeps it whole.
func TestFitResult(t *testing.T) {
	ws, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	env := &Env{WS: ws, TokenizerBudget: 300, Tokens: tokens.Default()}
	if got := FitResult(env, "mcp", "short"); got != "short" {
		t.Errorf("a short result became %q", got)
	}
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	long := b.String()
	got := FitResult(env, "mcp", long)
	if n := tokens.Default().Count(got); n > 300 {
		t.Errorf("the cut result counts %d tokens, over 300", n)
	}
	if !strings.HasPrefix(got, "line 0\n") || !strings.HasSuffix(got, "line 4999\n") || !strings.Contains(got, "bytes cut from the middle") {
		t.Errorf("cut result: %q", got)
	}
	i := strings.Index(got, "logs/mcp/")
	rel := got[i:]
	rel = rel[:strings.IndexByte(rel, ':')]
	kept, err := os.ReadFile(filepath.Join(ws.Root(), rel))
	if err != nil || string(kept) != long {
		t.Errorf("kept %s: %d bytes, %v", rel, len(kept), err)
	}
}
