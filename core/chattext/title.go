package chattext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Title makes a one-line title from a message: the first line that still
// has text once platform references are taken out (user, role and special
// mentions such as <@U123>, <@!123>, <@&123> and <!here> are removed;
// <#C1|name> becomes #name, <url|text> becomes text, <url> the URL and
// <:emoji:id> :emoji:), with a leading heading or quote marker dropped and
// white space collapsed. It is cut to at most max runes, ending in "…" when
// cut, never inside a grapheme where it can help it. It returns "" when the
// message has no text or max is below 1.
func Title(text string, max int) string {
	if max < 1 {
		return ""
	}
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(stripRefs(line))
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

// stripRefs rewrites Slack and Discord <…> references in line as plain text.
func stripRefs(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '<')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		e := strings.IndexAny(line[i+1:], "<>")
		if e < 0 || line[i+1+e] != '>' {
			b.WriteByte('<')
			line = line[i+1:]
			continue
		}
		inner := line[i+1 : i+1+e]
		line = line[i+e+2:]
		target, label, hasLabel := strings.Cut(inner, "|")
		switch {
		case strings.HasPrefix(inner, "@"), strings.HasPrefix(inner, "!"):
			// a mention: dropped
		case strings.HasPrefix(inner, "#"):
			if hasLabel && label != "" {
				b.WriteString("#" + label)
			}
		case strings.HasPrefix(inner, ":"), strings.HasPrefix(inner, "a:"):
			parts := strings.Split(inner, ":")
			if len(parts) == 3 && parts[1] != "" {
				b.WriteString(":" + parts[1] + ":")
			} else {
				b.WriteString("<" + inner + ">")
			}
		case safeURL(target):
			if hasLabel && label != "" {
				b.WriteString(label)
			} else {
				b.WriteString(target)
			}
		default:
			b.WriteString("<" + inner + ">")
		}
	}
}
