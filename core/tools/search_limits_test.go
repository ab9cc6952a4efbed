package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowGrepFile writes a 15 MB text file on which slowPattern takes many
// seconds: a counted repetition makes every line cost the regexp engine
// tens of microseconds.
func slowGrepFile(t *testing.T, env *Env) {
	t.Helper()
	line := strings.Repeat("abcdefghij", 10) + "\n"
	put(t, env, "input/big.log", []byte(strings.Repeat(line, 150000)))
}

const slowPattern = `[a-j]{50}z`

// TestGrepAbortWithinAFile: when the call's context ends while Grep is
// matching inside one long file, Grep returns within 2 s with an error
// instead of finishing the file.
func TestGrepAbortWithinAFile(t *testing.T) {
	env := newEnv(t)
	slowGrepFile(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res := callWithin(t, ctx, time.Minute, Grep{}, env, obj{"pattern": slowPattern})
	if d := time.Since(start); d > 300*time.Millisecond+2*time.Second {
		t.Errorf("Grep returned %v after the start, %v after its context ended; want within 2 s", d, d-300*time.Millisecond)
	}
	if msg := failed(t, res); !strings.Contains(msg, "ran out of time") {
		t.Errorf("result %q does not say the call ended", msg)
	}
}

// TestGrepStopsAtItsTimeout: past its own time limit Grep returns what it
// found, saying it stopped, not an error.
func TestGrepStopsAtItsTimeout(t *testing.T) {
	env := newEnv(t)
	put(t, env, "input/a.txt", []byte("abcdefghij z\n"))
	slowGrepFile(t, env)
	res := callWithin(t, context.Background(), time.Minute, Grep{Timeout: time.Second}, env, obj{"pattern": `[a-j]{5,50} ?z`})
	got := ok(t, res)
	if !strings.HasPrefix(got, "input/a.txt:1:abcdefghij z\n") || !strings.HasSuffix(got, "[Grep stopped after 1 s, before it had searched every file; narrow it with path, glob or a more specific pattern]") {
		t.Errorf("result %q, want the match and the note that Grep stopped", got)
	}
}

// TestSearchSparseFileAndFIFO: a 10 GB sparse file and a FIFO in the
// workspace are skipped by Grep without being read and listed by Glob.
func TestSearchSparseFileAndFIFO(t *testing.T) {
	env := newEnv(t)
	put(t, env, "input/small.txt", []byte("needle\n"))
	sparse := put(t, env, "input/huge.txt", []byte("needle\n"))
	if err := os.Truncate(sparse, 10<<30); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(env.WS.Root(), "input", "pipe.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := ok(t, callWithin(t, context.Background(), time.Minute, Grep{}, env, obj{"pattern": "needle"}))
	if got != "input/small.txt:1:needle" {
		t.Errorf("Grep = %q, want the small file's match alone", got)
	}
	got = ok(t, callWithin(t, context.Background(), time.Minute, Glob{}, env, obj{"pattern": "input/*"}))
	if got != "input/huge.txt\ninput/pipe.txt\ninput/small.txt" {
		t.Errorf("Glob = %q", got)
	}
}

// TestSearchChecksTheContextFirst: a search whose context has ended
// visits nothing and says why.
func TestSearchChecksTheContextFirst(t *testing.T) {
	env := newEnv(t)
	for _, name := range []string{"a", "b", "c", "d/e", "d/f"} {
		put(t, env, "input/"+name, []byte("x\n"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if m, _, err := glob(ctx, env, "input/**"); !errors.Is(err, context.Canceled) || len(m) != 0 {
		t.Errorf("glob = %q, %v; want nothing and context.Canceled", m, err)
	}
	if out, err := grep(ctx, env, grepArgs{Pattern: "x", Path: "input"}); !errors.Is(err, context.Canceled) || out != "" {
		t.Errorf("grep = %q, %v; want nothing and context.Canceled", out, err)
	}
	m, _, err := glob(context.Background(), env, "input/**")
	if err != nil || strings.Join(m, " ") != "input/a input/b input/c input/d/ input/d/e input/d/f" {
		t.Errorf("glob = %q, %v; want every entry in lexical order", m, err)
	}
}
