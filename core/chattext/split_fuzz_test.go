package chattext

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

var splitSeeds = []string{
	"",
	"hello world",
	"para one\n\npara two\n\npara three",
	"```go\nfunc main() {}\n```",
	"text\n```\nunclosed fence\nmore",
	"~~~ python\nprint(1)\n~~~\n\n```\n```",
	"```a\n````\nnested?\n````\n```",
	"```x```inline then\n```\nblock\n```",
	strings.Repeat("word ", 200),
	strings.Repeat("x", 500),
	strings.Repeat("日本語の文章です。", 50),
	strings.Repeat("👨‍👩‍👧🇯🇵", 40),
	"  - item\n    ```sh\n    ls -la\n    ```\n  - next",
	"\xff\xfe invalid \xc3 utf8",
	"a\r\n\r\nb\r\nc",
}

// checkSplit asserts the properties every split must have.
func checkSplit(t *testing.T, text string, limit int, bytes bool) {
	t.Helper()
	min := 1
	if bytes {
		min = utf8.UTFMax
	}
	eff := max(limit, min)
	ps := split(text, limit, bytes, 0)
	size := utf8.RuneCountInString
	if bytes {
		size = func(s string) int { return len(s) }
	}
	repairable := 2*longestMarkerRun(text)+2+2*min <= eff
	var got strings.Builder
	for i, p := range ps {
		s := p.String()
		if n := size(s); n > eff {
			t.Fatalf("part %d has size %d > limit %d: %q", i, n, eff, s)
		}
		if strings.TrimSpace(p.body) == "" {
			t.Fatalf("part %d has no visible body: %q", i, s)
		}
		if !strings.HasPrefix(text[p.start:], p.body) {
			t.Fatalf("part %d body is not the text at %d: %q", i, p.start, p.body)
		}
		if repairable {
			f, lines := fence{}, 0
			for _, line := range strings.Split(s, "\n") {
				var isFence bool
				f, isFence = step(f, line)
				if isFence {
					lines++
				}
			}
			if f.on() || lines%2 != 0 {
				t.Fatalf("part %d leaves a fence open (%d fence lines): %q", i, lines, s)
			}
		}
		got.WriteString(visible(p.body))
	}
	if a, b := visible(text), got.String(); a != b {
		t.Fatalf("content changed:\n text %q\nparts %q", a, b)
	}
}

func visible(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

func longestMarkerRun(s string) int {
	best, cur := 0, 0
	var c byte
	for i := 0; i < len(s); i++ {
		if (s[i] == '`' || s[i] == '~') && (cur == 0 || s[i] == c) {
			c = s[i]
			cur++
		} else if s[i] == '`' || s[i] == '~' {
			c, cur = s[i], 1
		} else {
			cur = 0
		}
		best = max(best, cur)
	}
	return best
}

func FuzzSplit(f *testing.F) {
	for _, s := range splitSeeds {
		for _, l := range []int{1, 7, 40, 2000} {
			f.Add(s, l)
		}
	}
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if limit > 5000 || limit < -5 {
			limit %= 5000
		}
		checkSplit(t, text, limit, false)
	})
}

func FuzzSplitBytes(f *testing.F) {
	for _, s := range splitSeeds {
		for _, l := range []int{3, 12, 40, 3800} {
			f.Add(s, l)
		}
	}
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if limit > 5000 || limit < -5 {
			limit %= 5000
		}
		checkSplit(t, text, limit, true)
	})
}

// TestSplitSeedsEveryLimit checks the fuzz properties for every seed at
// every small limit, where fence repair is hardest.
func TestSplitSeedsEveryLimit(t *testing.T) {
	for _, s := range splitSeeds {
		for l := -2; l < 120; l++ {
			checkSplit(t, s, l, false)
			checkSplit(t, s, l, true)
		}
	}
}
