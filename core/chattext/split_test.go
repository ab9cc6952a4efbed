package chattext

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{"fits", "short text", 40, []string{"short text"}},
		{"empty", "", 40, nil},
		{"only whitespace", "   \n\t\n  ", 40, nil},
		{"trims ends", "\n\n  hello  \n\n", 40, []string{"  hello"}},
		{
			"paragraphs then words", "First paragraph is here.\n\nSecond paragraph is a bit longer than that.\n\nThird.", 40,
			[]string{"First paragraph is here.", "Second paragraph is a bit longer than", "that.\n\nThird."},
		},
		{
			"sentence before space", "Hello. This is a sentence. And another one follows here.", 30,
			[]string{"Hello. This is a sentence.", "And another one follows here."},
		},
		{
			"fence longer than limit reopened with info string",
			"Run this:\n\n```sh\necho one\necho two\necho three\necho four\n```\nDone.", 40,
			[]string{"Run this:\n\n```sh\necho one\necho two\n```", "```sh\necho three\necho four\n```\nDone."},
		},
		{"adjacent fences", "```\na\n```\n```py\nb\n```", 12, []string{"```\na\n```", "```py\nb\n```"}},
		{
			"nested fence inside a longer one", "````md\n```go\nx\n```\nmore text here\n````", 24,
			[]string{"````md\n```go\nx\n```\n````", "````md\nmore text\n````", "````md\nhere\n````"},
		},
		{"tilde fence", "~~~\none two three four\n~~~", 20, []string{"~~~\none two\n~~~", "~~~\nthree four\n~~~"}},
		{"unclosed fence is closed", "text\n```go\nfunc f() {}", 40, []string{"text\n```go\nfunc f() {}\n```"}},
		{"inline triple backticks are not a fence", "a ```b``` c d e f", 10, []string{"a ```b```", "c d e f"}},
		{
			"very long word cut as last resort", "see https://example.com/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa end", 20,
			[]string{"see", "https://example.com/", "aaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa end"},
		},
		{
			"japanese at sentence ends", "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。", 12,
			[]string{"吾輩は猫である。", "名前はまだ無い。", "どこで生れたかとんと見当", "がつかぬ。"},
		},
		{"japanese at commas", "分割されるべきです、そうでしょう？はい。", 12, []string{"分割されるべきです、", "そうでしょう？はい。"}},
		{
			"emoji graphemes kept whole", "👍🏽👍🏽👍🏽 🇯🇵🇫🇷 👩\u200d💻👩\u200d💻", 5,
			[]string{"👍🏽👍🏽", "👍🏽", "🇯🇵🇫🇷", "👩\u200d💻", "👩\u200d💻"},
		},
		{"indentation kept at a line start", "  - item one\n    continued line\n  - item two", 20, []string{"  - item one", "    continued line", "  - item two"}},
		{"limit below one", "ab", 0, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.text, tt.limit)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Split(%q, %d) (-want +got):\n%s", tt.text, tt.limit, diff)
			}
			checkSplit(t, tt.text, tt.limit, false)
		})
	}
}

func TestSplitBytes(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{"japanese is three bytes a rune", "吾輩は猫である。名前はまだ無い。", 24, []string{"吾輩は猫である。", "名前はまだ無い。"}},
		{"never inside a rune", "ééééé", 5, []string{"éé", "éé", "é"}},
		{"limit below a rune", "日本", 1, []string{"日", "本"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SplitBytes(tt.text, tt.limit)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SplitBytes(%q, %d) (-want +got):\n%s", tt.text, tt.limit, diff)
			}
			checkSplit(t, tt.text, tt.limit, true)
		})
	}
}

// report builds a long answer of the kind models write: prose paragraphs,
// lists, code blocks with info strings, Japanese and emoji.
func report(sections int) string {
	var b strings.Builder
	for i := range sections {
		fmt.Fprintf(&b, "## Section %d\n\n", i)
		b.WriteString(strings.Repeat("This paragraph explains a change in some detail, with reasons. ", 6) + "\n\n")
		b.WriteString("- first point 👍🏽\n- second point with `inline code`\n- 日本語の説明です。とても大事です。\n\n")
		fmt.Fprintf(&b, "```go\n")
		for j := range 12 + i%5 {
			fmt.Fprintf(&b, "\tfmt.Println(%d, %q) // line %d of a long listing\n", j, "hello, 世界", j)
		}
		b.WriteString("```\n\n")
	}
	return b.String()
}

func TestSplitPlatformLimits(t *testing.T) {
	text := report(20)
	for _, tt := range []struct {
		limit int
		bytes bool
	}{{2000, false}, {3000, false}, {3800, true}, {40, false}, {40, true}} {
		t.Run(fmt.Sprintf("%d bytes=%v", tt.limit, tt.bytes), func(t *testing.T) {
			checkSplit(t, text, tt.limit, tt.bytes)
			ps := split(text, tt.limit, tt.bytes, 0)
			size := utf8.RuneCountInString(text)
			if tt.bytes {
				size = len(text)
			}
			// Parts are not wastefully short: together they average more
			// than half the limit.
			if avg := size / len(ps); tt.limit >= 2000 && avg < tt.limit/2 {
				t.Errorf("%d parts average %d, want at least %d", len(ps), avg, tt.limit/2)
			}
			for i, p := range ps {
				if p.open != "" && p.open != "```go\n" {
					t.Errorf("part %d reopens with %q, want the original info string", i, p.open)
				}
			}
		})
	}
}

func TestParts(t *testing.T) {
	text := report(3)
	n := len(Split(text, 500))
	tests := []struct {
		name     string
		maxParts int
		wantN    int
		wantFile bool
	}{
		{"within bound", n, n, false},
		{"over bound", n - 1, 0, true},
		{"no bound", 0, n, false},
		{"one part allowed", 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts, asFile := Parts(text, 500, tt.maxParts)
			if len(parts) != tt.wantN || asFile != tt.wantFile {
				t.Errorf("Parts(..., %d) = %d parts, asFile %v; want %d, %v", tt.maxParts, len(parts), asFile, tt.wantN, tt.wantFile)
			}
			if !asFile {
				if diff := cmp.Diff(Split(text, 500), parts); diff != "" {
					t.Errorf("Parts differs from Split (-want +got):\n%s", diff)
				}
			}
		})
	}
	if parts, asFile := Parts("short", 500, 1); asFile || len(parts) != 1 {
		t.Errorf("Parts(short) = %v, %v; want one part", parts, asFile)
	}
}

func BenchmarkSplit(b *testing.B) {
	text := report(200)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Split(text, 2000)
	}
}
