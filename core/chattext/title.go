package chattext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Title makes a one-line title from a message's plain text (Readable's
// output, not the platform's markup: references are rewritten once, where
// a message comes in): its first line that has text, with a leading
// heading or quote marker dropped and white space collapsed. It is cut to
// at most max runes, ending in "…" when cut, never inside a grapheme where
// it can help it. It returns "" when the message has no text or max is
// below 1.
func Title(text string, max int) string {
	if max < 1 {
		return ""
	}
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(line)
		t = strings.TrimLeft(t, "> \t")
		if k := run(t, '#'); k > 0 && k <= 6 && k < len(t) && (t[k] == ' ' || t[k] == '\t') {
			t = t[k:]
		}
		t = strings.Join(strings.FieldsFunc(t, func(r rune) bool {
			return unicode.IsSpace(r) || unicode.IsControl(r)
		}), " ")
		if t != "" {
			return cutTitle(t, max)
		}
	}
	return ""
}

func cutTitle(t string, max int) string {
	if utf8.RuneCountInString(t) <= max {
		return t
	}
	// Boundaries before each rune, the last of which keeps max-1 runes.
	var (
		end, best int
		prev      rune = ' '
		ri        int
		count     int
	)
	for i, r := range t {
		if count == max-1 {
			end = i
			break
		}
		if count > 0 && graphemeBreak(prev, r, ri) {
			best = i
		}
		if isRegional(r) {
			ri++
		} else {
			ri = 0
		}
		prev = r
		count++
	}
	// end is a boundary only if the rune there may start a grapheme.
	r, _ := utf8.DecodeRuneInString(t[end:])
	if !graphemeBreak(prev, r, ri) {
		end = best
	}
	return strings.TrimRightFunc(t[:end], unicode.IsSpace) + "…"
}
