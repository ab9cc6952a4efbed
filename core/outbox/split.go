package outbox

import (
	"strings"
	"unicode/utf8"
)

// Split cuts text into parts of at most limit characters (runes), breaking
// at a blank line where it can, else at a line end, else at a space, and
// only else inside a word. Breaks are looked for in the second half of a
// part first, so that parts are not needlessly short. The whitespace at a
// break is dropped (indentation at the start of a line is kept); parts are
// never empty. limit <= 0 means no limit.
//
// It knows nothing of Markdown: a code fence cut in two is closed in one
// part and unopened in the next. Callers that post Markdown pass a
// fence-aware splitter in Config.Split.
func Split(text string, limit int) []string {
	text = strings.Trim(text, "\n")
	if text == "" {
		return nil
	}
	if limit <= 0 {
		return []string{text}
	}
	var parts []string
	for text != "" {
		if runeLen(text) <= limit {
			parts = append(parts, text)
			break
		}
		cut := runeOffset(text, limit)
		end, next := breakAt(text[:cut])
		if end <= 0 {
			end, next = cut, cut
		}
		part := strings.TrimRight(text[:end], " \t\n")
		if part == "" { // only whitespace before the break
			part, next = text[:cut], cut
		}
		parts = append(parts, part)
		text = strings.TrimLeft(text[next:], "\n")
	}
	return parts
}

// breakAt returns where to end a part cut from head (end) and where the
// next part starts (next); end is 0 when head has no break.
func breakAt(head string) (end, next int) {
	half := len(head) / 2
	seps := []string{"\n\n", "\n", " "}
	for _, sep := range seps {
		if i := strings.LastIndex(head, sep); i > half {
			return i, i + len(sep)
		}
	}
	for _, sep := range seps {
		if i := strings.LastIndex(head, sep); i > 0 {
			return i, i + len(sep)
		}
	}
	return 0, 0
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// runeOffset returns the byte offset of s's n-th rune (len(s) when s has
// fewer).
func runeOffset(s string, n int) int {
	i := 0
	for off := range s {
		if i == n {
			return off
		}
		i++
	}
	return len(s)
}

// ellipsis marks a text that was cut.
const ellipsis = "…"

// cutRunes returns s cut to at most n runes, ending in an ellipsis when cut.
func cutRunes(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	if n <= 1 {
		return s[:runeOffset(s, n)]
	}
	return s[:runeOffset(s, n-1)] + ellipsis
}

// cutBytes returns s cut to at most n bytes on a rune boundary, ending in an
// ellipsis when cut and there is room for it.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	mark := ""
	if n > len(ellipsis) {
		n -= len(ellipsis)
		mark = ellipsis
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}
