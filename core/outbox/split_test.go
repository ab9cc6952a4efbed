package outbox_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-bot/baton/core/outbox"
	"github.com/google/go-cmp/cmp"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{"empty", "", 10, nil},
		{"only newlines", "\n\n", 10, nil},
		{"fits", "hello world", 11, []string{"hello world"}},
		{"no limit", "hello world", 0, []string{"hello world"}},
		{"paragraphs", "one one\n\ntwo two\n\nthree", 17, []string{"one one\n\ntwo two", "three"}},
		{"a paragraph before a line", "aaaa aaaa\n\nbbb\nccc", 16, []string{"aaaa aaaa", "bbb\nccc"}},
		{"a line before a space", "aaaa aaaa\nbbb bbb", 13, []string{"aaaa aaaa", "bbb bbb"}},
		{"a space in the second half", "aaaaaaa bbbbbb", 10, []string{"aaaaaaa", "bbbbbb"}},
		{"an early break rather than none", "a bbbbbbbbbbbb", 10, []string{"a", "bbbbbbbbbbbb"[:10], "bb"}},
		{"a word longer than the limit", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"runes, not bytes", "éééééé", 4, []string{"éééé", "éé"}},
		{"indentation kept", "aaaaaaaa\n    code()", 12, []string{"aaaaaaaa", "    code()"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, outbox.Split(tt.text, tt.limit)); diff != "" {
				t.Errorf("Split(%q, %d) (-want +got):\n%s", tt.text, tt.limit, diff)
			}
		})
	}
}

func TestSplitKeepsEveryWord(t *testing.T) {
	var b strings.Builder
	for i := range 400 {
		b.WriteString(strings.Repeat("wörd", i%7+1))
		switch {
		case i%23 == 0:
			b.WriteString("\n\n")
		case i%9 == 0:
			b.WriteString("\n")
		default:
			b.WriteString(" ")
		}
	}
	text := b.String()
	for _, limit := range []int{5, 50, 333, 3000} {
		parts := outbox.Split(text, limit)
		for i, p := range parts {
			if n := utf8.RuneCountInString(p); n > limit || strings.TrimSpace(p) == "" {
				t.Errorf("limit %d: part %d has %d characters: %q", limit, i, n, p)
			}
		}
		squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
		if squash(strings.Join(parts, "")) != squash(text) {
			t.Errorf("limit %d: the parts do not hold the text's words", limit)
		}
	}
}
