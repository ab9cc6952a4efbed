package chattext

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestClean(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		max      int
		want     string
		wantsCut bool
	}{
		{"unchanged", "hello\tworld\n", 0, "hello\tworld\n", false},
		{"invalid utf8 runs become one replacement", "a\xff\xfeb\xc3", 0, "a\uFFFDb\uFFFD", false},
		{"controls stripped", "a\x00b\x1b[31mc\x07d\x7fe\u009bf", 0, "ab[31mcdef", false},
		{"crlf and lone cr", "a\r\nb\rc\r\n", 0, "a\nb\nc\n", false},
		{"cap at rune boundary", "aé日", 4, "aé", true},
		{"cap exact fit", "aé日", 6, "aé日", false},
		{"cap counts the replacement", "ab\xff", 3, "ab", true},
		{"cap of zero means none", strings.Repeat("x", 100), 0, strings.Repeat("x", 100), false},
		{"valid replacement char kept", "\uFFFD", 0, "\uFFFD", false},
		{"emoji kept", "👩\u200d💻", 0, "👩\u200d💻", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := Clean(tt.in, tt.max)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Clean(%q, %d) (-want +got):\n%s", tt.in, tt.max, diff)
			}
			if cut != tt.wantsCut {
				t.Errorf("Clean(%q, %d) cut = %v, want %v", tt.in, tt.max, cut, tt.wantsCut)
			}
		})
	}
}

func TestCleanLargeMessage(t *testing.T) {
	const maxBytes = 64 << 10
	in := strings.Repeat("日本語 text\x00\r\n", 1<<20/16) // about 1 MB
	got, cut := Clean(in, maxBytes)
	if !cut {
		t.Fatal("a 1 MB message was not cut at 64 KiB")
	}
	if len(got) > maxBytes || len(got) < maxBytes-utf8.UTFMax {
		t.Errorf("len = %d, want within a rune of %d", len(got), maxBytes)
	}
	if !utf8.ValidString(got) || strings.ContainsAny(got, "\x00\r") {
		t.Error("capped text is not clean")
	}
}

func FuzzClean(f *testing.F) {
	f.Add("a\x00\r\n\xffb", 3)
	f.Fuzz(func(t *testing.T, in string, max int) {
		got, cut := Clean(in, max)
		if !utf8.ValidString(got) {
			t.Fatalf("Clean(%q) = %q is not valid UTF-8", in, got)
		}
		for _, r := range got {
			if r < 0x20 && r != '\t' && r != '\n' || r >= 0x7f && r <= 0x9f {
				t.Fatalf("Clean(%q) = %q keeps control %U", in, got, r)
			}
		}
		if max > 0 && len(got) > max {
			t.Fatalf("Clean(%q, %d) = %d bytes", in, max, len(got))
		}
		if full, _ := Clean(in, 0); !strings.HasPrefix(full, got) || cut != (full != got) {
			t.Fatalf("Clean(%q, %d) = %q, %v is not the uncapped %q cut", in, max, got, cut, full)
		}
	})
}

func TestTitle(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"first line", "Fix the build\nsecond line", 80, "Fix the build"},
		{"plain mention kept", "@alice please fix the flaky test", 80, "@alice please fix the flaky test"},
		{"only white space on the first line", "  \n\n  deploy staging  ", 80, "deploy staging"},
		{"markup is not rewritten again", "<@U1> a &lt; b", 80, "<@U1> a &lt; b"},
		{"heading marker", "## Release notes", 80, "Release notes"},
		{"whitespace collapsed", "a\t\tb   c\r", 80, "a b c"},
		{"cut with ellipsis", "abcdefghij", 5, "abcd…"},
		{"cut trims the space before the ellipsis", "abc defgh", 5, "abc…"},
		{"cut japanese", "吾輩は猫である。名前はまだ無い。", 6, "吾輩は猫で…"},
		{"cut keeps emoji whole", "ab👍🏽cd", 4, "ab…"},
		{"exact fit", "abcde", 5, "abcde"},
		{"max one", "abc", 1, "…"},
		{"max zero", "abc", 0, ""},
		{"nothing", " \n \n", 10, ""},
		{"unclosed angle kept", "a < b", 10, "a < b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Title(tt.in, tt.max)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Title(%q, %d) (-want +got):\n%s", tt.in, tt.max, diff)
			}
			if n := utf8.RuneCountInString(got); n > max(tt.max, 0) {
				t.Errorf("Title(%q, %d) has %d runes", tt.in, tt.max, n)
			}
		})
	}
}
