package tokens

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// direct counts s with the tokenizer alone, no pieces and no memo.
func direct(t testing.TB, b *BPE, s string) int {
	t.Helper()
	n, err := b.codec.Count(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCountMatchesTokenizer checks that counting piece by piece through the
// memo gives the tokenizer's own count, on real text: Baton's sources, and
// English, Japanese and mixed samples.
func TestCountMatchesTokenizer(t *testing.T) {
	samples := []string{
		"Hello, world!  How's it going?\n\n  - item one\n  - item two\n",
		"報告書を要約してください。明日までに、three points で。",
		"x := f(y)   // comment\n\tif err != nil {\n\t\treturn err\n\t}\n",
		"  leading spaces, trailing spaces   \n\n\n   \t mixed \r\n crlf",
		"emoji 🎉🎉 and numbers 1234567 3.14159 and URLs https://example.com/a?b=c&d=e",
	}
	files, _ := filepath.Glob(filepath.Join("..", "*", "*.go"))
	for _, f := range files[:min(len(files), 40)] {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, string(src))
	}
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		b, err := New(enc)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range samples {
			if strings.Contains(s, strings.Repeat(" ", maxSpaceRun)) {
				continue // long whitespace runs are counted in pieces on purpose
			}
			for range 2 { // the second time through the memo
				if got, want := b.Count(s), direct(t, b, s); got != want {
					t.Errorf("%s sample %d: Count = %d, the tokenizer says %d", enc, i, got, want)
				}
			}
		}
	}
}

func FuzzCountMatchesTokenizer(f *testing.F) {
	f.Add("Hello, world!  How's it going?")
	f.Add("a\n b\t\tc  d.\n\ne")
	f.Add("日本語 と English ")
	b := Default()
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 2000 || strings.Contains(s, strings.Repeat(" ", 16)) {
			return
		}
		run := 0
		for _, r := range s { // skip long whitespace runs of any kind
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x85 || r == 0xA0 {
				run++
				if run >= 16 {
					return
				}
				continue
			}
			run = 0
		}
		if got, want := b.Count(s), direct(t, b, s); got != want {
			t.Errorf("Count(%q) = %d, the tokenizer says %d", s, got, want)
		}
	})
}
