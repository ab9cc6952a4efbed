package chattext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// SlackMrkdwn converts the common Markdown that models write into Slack's
// mrkdwn:
//
//   - **bold** and __bold__ become *bold*, *italic* and _italic_ become
//     _italic_, ***both*** becomes *_both_*, ~~strike~~ becomes ~strike~;
//     delimiters inside a word are left alone (Slack would not format them);
//   - [text](url) and ![alt](url) become <url|text> for http, https, mailto
//     and ftp URLs; other targets are written as "text (target)" so that
//     nothing but a real link reaches Slack's <…> syntax; autolinks <url>
//     stay links, and Slack's own <@U…> and <#C…> references are kept;
//   - # headings become a bold line, - * + bullets become •, task list
//     boxes become ☐ and ☑; numbered lists, block quotes and rules stay;
//   - &, < and > in text become &amp;, &lt; and &gt;, as Slack requires,
//     including inside code; inside the links it produces, & is left as is
//     and <, >, | and spaces in a URL are percent-encoded;
//   - inline code and fenced code blocks are not converted (only escaped);
//     a fence's info string is dropped, since Slack shows it as code, and
//     a fence left open is closed.
//
// Any <!…> in the input is escaped and so cannot ping anyone.
func SlackMrkdwn(markdown string) string {
	lines := strings.Split(markdown, "\n")
	var b strings.Builder
	b.Grow(len(markdown) + len(markdown)/8)
	var f fence
	for i, line := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		next, isFence := step(f, line)
		switch {
		case isFence:
			b.WriteString("```")
		case f.on():
			escapeTo(&b, line)
		default:
			b.WriteString(mrkdwnLine(line))
		}
		f = next
	}
	if f.on() {
		b.WriteString("\n```")
	}
	return b.String()
}

// mrkdwnLine converts one line outside code blocks.
func mrkdwnLine(line string) string {
	rest := strings.TrimLeft(line, " \t")
	indent := line[:len(line)-len(rest)]
	switch {
	case rest == "":
		return line
	case isRule(rest):
		return indent + rest
	case rest[0] == '#':
		k := run(rest, '#')
		if k <= 6 && (k == len(rest) || rest[k] == ' ' || rest[k] == '\t') {
			title := strings.TrimSpace(rest[k:])
			if t := strings.TrimRight(title, "#"); t == "" || strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t") {
				title = strings.TrimSpace(t) // closing sequence of #s
			}
			if title == "" {
				return ""
			}
			return indent + "*" + inliner{noBold: true}.convert(title) + "*"
		}
	case (rest[0] == '-' || rest[0] == '*' || rest[0] == '+') && len(rest) > 1 && (rest[1] == ' ' || rest[1] == '\t'):
		item := strings.TrimLeft(rest[2:], " \t")
		switch {
		case strings.HasPrefix(item, "[ ] "):
			item = "☐ " + item[4:]
		case strings.HasPrefix(item, "[x] "), strings.HasPrefix(item, "[X] "):
			item = "☑ " + item[4:]
		}
		return indent + "• " + inliner{}.convert(item)
	case rest[0] == '>':
		return indent + ">" + mrkdwnLine(rest[1:])
	}
	return indent + inliner{}.convert(rest)
}

// isRule reports a thematic break (---, ***, ___, spaced or not).
func isRule(s string) bool {
	c := s[0]
	if c != '-' && c != '*' && c != '_' {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case c:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3
}

// inliner converts inline Markdown. noBold is set inside headings, which
// are bold already; label inside link labels, which Slack does not format
// and where & stays as is.
type inliner struct {
	noBold bool
	label  bool
	depth  int
}

// maxDepth bounds nested emphasis, so that pathological input stays linear.
const maxDepth = 8

func (in inliner) convert(s string) string {
	var b strings.Builder
	var noCloser [256][4]bool // closers known absent, by character and run length
	noCode := map[int]bool{}  // code span lengths known to have no closing run
	text := func(t string) {
		if in.label {
			escapeAngles(&b, t)
		} else {
			escapeTo(&b, t)
		}
	}
	i := 0
	for i < len(s) {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) && isASCIIPunct(s[i+1]) {
				text(s[i+1 : i+2])
				i += 2
				continue
			}
		case '`':
			n := run(s[i:], '`')
			if noCode[n] {
				b.WriteString(s[i : i+n])
				i += n
				continue
			}
			if end, ok := codeSpan(s, i, n); ok {
				code := s[i+n : end-n]
				if !in.label {
					if strings.IndexByte(code, '`') < 0 {
						if len(code) > 2 && code[0] == ' ' && code[len(code)-1] == ' ' {
							code = code[1 : len(code)-1]
						}
						b.WriteByte('`')
						escapeTo(&b, code)
						b.WriteByte('`')
					} else {
						b.WriteString(s[i : i+n])
						escapeTo(&b, code)
						b.WriteString(s[i : i+n])
					}
				} else {
					text(code)
				}
				i = end
				continue
			}
			noCode[n] = true // and for every later run of n
			b.WriteString(s[i : i+n])
			i += n
			continue
		case '!', '[':
			j := i
			if c == '!' {
				j++
			}
			if j < len(s) && s[j] == '[' && !in.label {
				if label, url, end, ok := parseLink(s, j); ok {
					b.WriteString(slackLink(label, url))
					i = end
					continue
				}
			}
		case '<':
			if tok, end, ok := angle(s, i); ok && !in.label {
				b.WriteString(tok)
				i = end
				continue
			}
		case '*', '_', '~':
			n := run(s[i:], c)
			if n <= 3 && !noCloser[c][n] && in.depth < maxDepth {
				if inner, end, ok := emphasis(s, i, n); ok {
					b.WriteString(in.wrap(c, n, inner))
					i = end
					continue
				} else if end < 0 {
					noCloser[c][n] = true
				}
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		text(s[i : i+size])
		i += size
	}
	return b.String()
}

// wrap converts the content of an emphasis run of n times c.
func (in inliner) wrap(c byte, n int, inner string) string {
	sub := in
	sub.depth++
	body := sub.convert(inner)
	switch {
	case in.label:
		return body
	case c == '~':
		return "~" + body + "~"
	case n == 1:
		return "_" + body + "_"
	case n == 2 && in.noBold:
		return body
	case n == 2:
		return "*" + body + "*"
	case in.noBold:
		return "_" + body + "_"
	default:
		return "*_" + body + "_*"
	}
}

// emphasis finds the closing run for the opening run of n times s[i] at i.
// It returns the content and the end of the closing run; end is -1 when no
// closing run exists anywhere after i (so later openers need not look).
func emphasis(s string, i, n int) (inner string, end int, ok bool) {
	c := s[i]
	if c == '~' && n != 2 {
		return "", 0, false
	}
	after := i + n
	if after >= len(s) || isSpaceByteAt(s, after) {
		return "", 0, false
	}
	if c != '~' && wordBefore(s, i) {
		return "", 0, false
	}
	for j := after; j < len(s); {
		switch s[j] {
		case '\\':
			j += 2
			continue
		case '`':
			m := run(s[j:], '`')
			if e, ok := codeSpan(s, j, m); ok {
				j = e
			} else {
				j += m
			}
			continue
		case c:
			m := run(s[j:], c)
			// Whether a run closes does not depend on the opener, so
			// when none does, no later opener need look.
			if m == n && !spaceBefore(s, j) && (c == '~' || !wordAt(s, j+m)) {
				return s[after:j], j + m, true
			}
			j += m
			continue
		}
		j++
	}
	return "", -1, false
}

// codeSpan returns the end of the code span opened by n backticks at i.
func codeSpan(s string, i, n int) (int, bool) {
	for j := i + n; j < len(s); {
		if s[j] != '`' {
			j++
			continue
		}
		m := run(s[j:], '`')
		if m == n {
			return j + m, true
		}
		j += m
	}
	return 0, false
}

// maxLabel is CommonMark's bound on a link label, which also keeps a text
// of many unclosed brackets linear.
const maxLabel = 999

// parseLink parses [label](destination "title") starting at the '[' at i.
func parseLink(s string, i int) (label, url string, end int, ok bool) {
	depth := 0
	k := -1
	bounded := s[:min(len(s), i+maxLabel+2)]
	for j := i; j < len(bounded) && k < 0; j++ {
		switch s[j] {
		case '\\':
			j++
		case '`':
			m := run(bounded[j:], '`')
			if e, ok := codeSpan(bounded, j, m); ok {
				j = e - 1
			} else {
				j += m - 1
			}
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				k = j
			}
		}
	}
	if k < 0 || k+1 >= len(s) || s[k+1] != '(' {
		return "", "", 0, false
	}
	label = s[i+1 : k]
	j := k + 2
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if j < len(s) && s[j] == '<' {
		e := strings.IndexAny(s[j+1:], "<>")
		if e < 0 || s[j+1+e] != '>' {
			return "", "", 0, false
		}
		url = s[j+1 : j+1+e]
		j += e + 2
	} else {
		start, parens := j, 0
	dest:
		for ; j < len(s); j++ {
			switch s[j] {
			case ' ', '\t':
				break dest
			case '(':
				parens++
			case ')':
				if parens == 0 {
					break dest
				}
				parens--
			}
		}
		url = s[start:j]
	}
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if j < len(s) && (s[j] == '"' || s[j] == '\'') {
		e := strings.IndexByte(s[j+1:], s[j])
		if e < 0 {
			return "", "", 0, false
		}
		j += e + 2
		for j < len(s) && s[j] == ' ' {
			j++
		}
	}
	if j >= len(s) || s[j] != ')' {
		return "", "", 0, false
	}
	return label, url, j + 1, true
}

// slackLink writes a Markdown link as mrkdwn.
func slackLink(label, url string) string {
	text := strings.TrimSpace(inliner{label: true}.convert(label))
	if !safeURL(url) {
		t := strings.TrimSpace(inliner{}.convert(label))
		var b strings.Builder
		escapeTo(&b, url)
		switch {
		case url == "":
			return t
		case t == "":
			return b.String()
		}
		return t + " (" + b.String() + ")"
	}
	if text == "" {
		return "<" + slackURL(url) + ">"
	}
	return "<" + slackURL(url) + "|" + text + ">"
}

func safeURL(u string) bool {
	l := strings.ToLower(u)
	for _, p := range []string{"http://", "https://", "mailto:", "ftp://"} {
		if strings.HasPrefix(l, p) && len(u) > len(p) {
			return true
		}
	}
	return false
}

// slackURL percent-encodes what would end or split Slack's <url|text>.
func slackURL(u string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		c := u[i]
		if c <= ' ' || c == '<' || c == '>' || c == '|' || c == 0x7f {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// angle handles a '<' at i: an autolink stays a Slack link, and Slack's own
// user and channel references are kept; anything else is not a token.
func angle(s string, i int) (string, int, bool) {
	e := strings.IndexAny(s[i+1:], "<>\n")
	if e < 0 || s[i+1+e] != '>' {
		return "", 0, false
	}
	inner := s[i+1 : i+1+e]
	end := i + e + 2
	if safeURL(inner) && !strings.ContainsAny(inner, " \t") {
		return "<" + slackURL(inner) + ">", end, true
	}
	if len(inner) > 1 && (inner[0] == '@' || inner[0] == '#') {
		id, label, _ := strings.Cut(inner[1:], "|")
		if id != "" && strings.IndexFunc(id, func(r rune) bool {
			return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) < 0 {
			var b strings.Builder
			escapeAngles(&b, label)
			if strings.Contains(inner, "|") {
				return "<" + inner[:1] + id + "|" + b.String() + ">", end, true
			}
			return "<" + inner + ">", end, true
		}
	}
	return "", 0, false
}

func escapeTo(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteByte(s[i])
		}
	}
}

func escapeAngles(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteByte(s[i])
		}
	}
}

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

func isSpaceByteAt(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r)
}

// wordBefore reports a letter or digit just before i.
func wordBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// wordAt reports a letter or digit at i.
func wordAt(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// spaceBefore reports white space (or the start) just before i.
func spaceBefore(s string, i int) bool {
	if i == 0 {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsSpace(r)
}
