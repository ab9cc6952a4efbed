package chattext

import (
	"strings"
	"unicode/utf8"
)

// Clean makes an inbound message safe to store and show: each run of
// invalid UTF-8 becomes one U+FFFD, CRLF and lone CR become LF, and control
// characters are removed except tab and newline (C0, DEL and C1: NUL breaks
// C strings and logs, ESC and CSI drive terminals). It then caps the result
// at maxBytes on a rune boundary and reports with cut whether it did; the
// caller adds a note saying the message was cut. A maxBytes below 1 means no
// cap. Clean reads no further than it needs, so a huge message costs at
// most maxBytes of work beyond the first cut.
func Clean(text string, maxBytes int) (clean string, cut bool) {
	var b strings.Builder
	if maxBytes > 0 {
		b.Grow(min(len(text), maxBytes))
	} else {
		b.Grow(len(text))
	}
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		out := text[i : i+n]
		switch {
		case r == utf8.RuneError && n == 1:
			for i+n < len(text) {
				r2, n2 := utf8.DecodeRuneInString(text[i+n:])
				if r2 != utf8.RuneError || n2 != 1 {
					break
				}
				n++
			}
			out = "\uFFFD"
		case r == '\r':
			if i+1 < len(text) && text[i+1] == '\n' {
				i++
				continue
			}
			out = "\n"
		case r == '\t' || r == '\n':
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			i += n
			continue
		}
		if maxBytes > 0 && b.Len()+len(out) > maxBytes {
			return b.String(), true
		}
		b.WriteString(out)
		i += n
	}
	return b.String(), false
}
