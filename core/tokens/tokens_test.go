package tokens

import (
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCount(t *testing.T) {
	c := Default()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"<|endoftext|>", 7}, // special tokens count as text
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := c.Count(tt.in); got != tt.want {
				t.Errorf("Count(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
	// Invalid UTF-8 is counted, not refused, and never as zero.
	if got := c.Count("\xff\xfe\xfd"); got < 1 || got > 3 {
		t.Errorf("Count(invalid UTF-8) = %d, want 1..3", got)
	}
}

func TestForModel(t *testing.T) {
	tests := []struct{ model, want string }{
		{"gpt-4o", "o200k_base"},
		{"gpt-4o-mini", "o200k_base"},
		{"gpt-4.1-nano", "o200k_base"},
		{"gpt-4", "cl100k_base"},
		{"gpt-3.5-turbo", "cl100k_base"},
		{"openai/gpt-4", "cl100k_base"},
		{"llama3.1:8b", "o200k_base"},
		{"", "o200k_base"},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := ForModel(tt.model).Encoding(); got != tt.want {
				t.Errorf("ForModel(%q) = %s, want %s", tt.model, got, tt.want)
			}
		})
	}
	if _, err := New("no-such-encoding"); err == nil {
		t.Error("New(no-such-encoding) succeeded")
	}
}

func TestCountConcurrent(t *testing.T) {
	c := Default()
	texts := []string{"hello world", strings.Repeat("log line 42: ok\n", 500), "日本語のテキストです。"}
	want := make([]int, len(texts))
	for i, s := range texts {
		want[i] = c.Count(s)
	}
	var wg sync.WaitGroup
	got := make([][]int, 8)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, s := range texts {
				got[g] = append(got[g], c.Count(s))
			}
		}()
	}
	wg.Wait()
	for g := range got {
		if diff := cmp.Diff(want, got[g]); diff != "" {
			t.Errorf("goroutine %d (-want +got):\n%s", g, diff)
		}
	}
}

// TestOffline proves the vocabularies are compiled in: the package cannot
// reach the network because it does not link a network stack.
func TestOffline(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net" || dep == "net/http" {
			t.Errorf("core/tokens depends on %s: the tokenizer could download at run time", dep)
		}
	}
}

// TestCountLongWhitespace checks that long whitespace runs, over which the
// tokenizer's own pre-split backtracks in quadratic time, are counted
// exactly, and that a megabyte of them is counted in linear time.
func TestCountLongWhitespace(t *testing.T) {
	c := Default()
	for _, s := range []string{
		strings.Repeat(" \n", 1000),
		strings.Repeat(" ", 3000) + "x",
		"a" + strings.Repeat("\t \n", 700) + "b",
	} {
		exact, err := c.enc.codec.Count(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Count(s); got != exact {
			t.Errorf("Count = %d, the tokenizer says %d", got, exact)
		}
	}
	// A megabyte of blank lines (minutes for the tokenizer) is " \n"
	// pieces, one token each.
	if n := c.Count(strings.Repeat(" \n", 500000)); n != 500000 {
		t.Errorf("Count(1 MB of blank lines) = %d, want 500000", n)
	}
}
