package llm

import (
	"encoding/json"
	"strings"
)

// RepairJSON tries to make s a valid JSON object or array by undoing the
// mistakes models make most when they write JSON by hand: commas before a
// closing } or ], strings in single quotes, and raw newlines, tabs and
// other control characters inside strings. It returns the repaired text
// and true when the result is valid JSON, or s and false when it is not
// (including when s was valid already: nothing to repair). Nothing else is
// guessed: a missing brace or quote stays an error for the model to fix.
func RepairJSON(s string) (string, bool) {
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') || json.Valid([]byte(t)) {
		return s, false
	}
	var b strings.Builder
	b.Grow(len(t) + 16)
	var quote byte // the open string's quote; 0 outside strings
	for i := 0; i < len(t); i++ {
		c := t[i]
		if quote != 0 {
			switch {
			case c == '\\' && i+1 < len(t):
				next := t[i+1]
				if quote == '\'' && next == '\'' {
					b.WriteByte('\'') // \' means ' in a single-quoted string
				} else {
					b.WriteByte(c)
					b.WriteByte(next)
				}
				i++
			case c == quote:
				b.WriteByte('"')
				quote = 0
			case c == '"': // inside a single-quoted string
				b.WriteString(`\"`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[c>>4])
				b.WriteByte("0123456789abcdef"[c&0xf])
			default:
				b.WriteByte(c)
			}
			continue
		}
		switch c {
		case '"', '\'':
			quote = c
			b.WriteByte('"')
		case ',':
			j := i + 1
			for j < len(t) && strings.IndexByte(" \t\r\n", t[j]) >= 0 {
				j++
			}
			if j < len(t) && (t[j] == '}' || t[j] == ']') {
				continue // a trailing comma
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	out := b.String()
	if !json.Valid([]byte(out)) {
		return s, false
	}
	return out, true
}
