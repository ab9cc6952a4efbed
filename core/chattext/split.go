package chattext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Split cuts a Markdown text into parts of at most limit characters each,
// where a character is a Unicode code point (a rune; invalid UTF-8 bytes
// count one each), which is how Slack and Discord count their message
// limits. A limit below 1 is treated as 1.
//
// Cut points are preferred in this order: between paragraphs (a blank line),
// at a line break, after a sentence end, at a space (or after CJK sentence
// and clause punctuation, since Japanese and Chinese have no spaces), and
// only as a last resort inside a word, then never inside a rune and, where
// possible, never inside a grapheme (an emoji sequence, a letter and its
// combining marks, a flag). A preferred cut is taken only when it fills at
// least half of the part; otherwise the latest cut at any word boundary is
// taken, so that a short paragraph does not produce a near-empty part.
//
// Fenced code blocks (``` or ~~~, any info string) are never broken open:
// when a part has to end inside a fence, the fence is closed at the end of
// that part and reopened with the same opening line (info string included)
// at the start of the next, and those added lines count towards the limit.
// A fence the text leaves unclosed is closed at the end of its last part.
// If the limit is too small to hold the reopening and closing lines plus
// one character, the fence is not repaired for that part.
//
// Whitespace at cut points is dropped (the indentation of a line that starts
// a part is kept) and so is whitespace at the ends of the text; no part is
// empty or only whitespace, and a text with no visible character gives nil.
// Concatenating the parts, minus the added fence lines and the dropped
// whitespace, gives back the text.
func Split(text string, limit int) []string {
	return assemble(split(text, limit, false, 0))
}

// SplitBytes is Split with the limit counted in UTF-8 bytes, as Slack counts
// it for chat.update. A limit below utf8.UTFMax is treated as utf8.UTFMax so
// that every rune fits in a part.
func SplitBytes(text string, limit int) []string {
	return assemble(split(text, limit, true, 0))
}

// Parts is Split for a post that may need several messages: when more than
// maxParts parts would be needed it returns asFile=true and no parts, and the
// caller uploads the whole text as a file with a short note instead. A
// maxParts below 1 means no bound.
func Parts(text string, limit, maxParts int) (parts []string, asFile bool) {
	max := 0
	if maxParts > 0 {
		max = maxParts + 1 // one more than allowed is enough to know
	}
	ps := split(text, limit, false, max)
	if maxParts > 0 && len(ps) > maxParts {
		return nil, true
	}
	return assemble(ps), false
}

// piece is one part before assembly; body is a substring of the text
// starting at byte offset start.
type piece struct {
	open  string // reopened fence line and its newline, or ""
	body  string
	close string // newline and closing fence, or ""
	start int
}

func (p piece) String() string { return p.open + p.body + p.close }

func assemble(ps []piece) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// fence is the state of a fenced code block; the zero value is outside any.
type fence struct {
	char byte   // '`' or '~'; 0 outside a fence
	n    int    // length of the opening run
	line string // opening line, trimmed, to reopen the fence with
}

func (f fence) on() bool { return f.char != 0 }

func (f fence) marker() string { return strings.Repeat(string(f.char), f.n) }

// step returns the fence state after line given the state f before it, and
// whether line is itself a fence line (opening or closing). Fences may be
// indented by any amount, since chat text often nests them in lists; a
// backtick fence's info string may not contain a backtick (```x``` on one
// line is inline code), and a closing fence is a run of the opening
// character at least as long as the opening run, with nothing after it.
func step(f fence, line string) (fence, bool) {
	t := strings.TrimLeft(line, " \t")
	if t == "" {
		return f, false
	}
	if f.on() {
		if t[0] != f.char {
			return f, false
		}
		k := run(t, f.char)
		if k >= f.n && strings.TrimSpace(t[k:]) == "" {
			return fence{}, true
		}
		return f, false
	}
	c := t[0]
	if c != '`' && c != '~' {
		return f, false
	}
	k := run(t, c)
	if k < 3 {
		return f, false
	}
	if c == '`' && strings.IndexByte(t[k:], '`') >= 0 {
		return f, false
	}
	return fence{char: c, n: k, line: strings.TrimSpace(t)}, true
}

func run(s string, c byte) int {
	k := 0
	for k < len(s) && s[k] == c {
		k++
	}
	return k
}

// lineEnd returns the end of the line that contains i. The last answer is
// kept, since every part on a long line asks for the same end.
func (s *splitter) lineEnd(i int) int {
	if s.eolValid && s.eolFrom <= i && i <= s.eol {
		return s.eol
	}
	s.eolFrom, s.eol, s.eolValid = i, len(s.text), true
	if j := strings.IndexByte(s.text[i:], '\n'); j >= 0 {
		s.eol = i + j
	}
	return s.eol
}

// Classes of cut points, best last.
const (
	cutSpace = iota + 1
	cutSentence
	cutLine
	cutParagraph
	numCuts
)

// cut is a candidate cut: the part's body is text[pos:a], the next part
// starts at b, used is the cost of the body and st the fence state at a.
type cut struct {
	a, b int
	used int
	st   fence
	ok   bool
}

type splitter struct {
	text  string
	limit int
	bytes bool

	eolFrom, eol int // text[eolFrom:eol] has no newline; eol is one or the end
	eolValid     bool
}

func split(text string, limit int, bytes bool, max int) []piece {
	min := 1
	if bytes {
		min = utf8.UTFMax
	}
	if limit < min {
		limit = min
	}
	text = strings.TrimRightFunc(text, unicode.IsSpace)
	if text == "" {
		return nil
	}
	// Leading blank lines go; the first line keeps its indentation.
	pos := 0
	for i, r := range text {
		if !unicode.IsSpace(r) {
			break
		}
		if r == '\n' {
			pos = i + 1
		}
	}
	s := splitter{text: text, limit: limit, bytes: bytes}
	var out []piece
	var carry fence
	for pos < len(text) {
		if max > 0 && len(out) == max {
			break
		}
		var p piece
		p, pos, carry = s.next(pos, carry)
		out = append(out, p)
	}
	return out
}

func (s *splitter) size(str string) int {
	if s.bytes {
		return len(str)
	}
	return utf8.RuneCountInString(str)
}

// cost is the cost of one rune of n bytes.
func (s *splitter) cost(n int) int {
	if s.bytes {
		return n
	}
	return 1
}

func (s *splitter) minRune() int {
	if s.bytes {
		return utf8.UTFMax
	}
	return 1
}

// closeCost is the cost of closing f at the end of a part.
func (s *splitter) closeCost(f fence) int {
	if !f.on() {
		return 0
	}
	return 1 + f.n
}

// next makes the part that starts at pos, inside the fence carry (if on),
// and returns it with where the next part starts and the fence it starts in.
func (s *splitter) next(pos int, carry fence) (piece, int, fence) {
	text := s.text
	var open string
	if carry.on() {
		open = carry.line + "\n"
		if s.size(open)+s.closeCost(carry) > s.limit/2 {
			open = carry.marker() + "\n" // the info string does not fit comfortably
		}
		if s.size(open)+s.closeCost(carry)+s.minRune() > s.limit {
			open, carry = "", fence{} // too small to repair the fence
		}
	}
	budget := s.limit - s.size(open)

	// Indentation that would crowd out the content is dropped.
	if ind := pos + len(text[pos:]) - len(strings.TrimLeftFunc(text[pos:], unicode.IsSpace)); ind > pos {
		if s.size(text[pos:ind])+s.closeCost(carry)+2*s.minRune() > budget {
			pos = ind
		}
	}

	var (
		word  [numCuts]cut // furthest fitting cut per class
		poor  cut          // furthest fitting word cut that leaves an empty fence or starts a false one
		good  cut          // furthest fitting cut inside a word, at a grapheme boundary
		anyr  cut          // furthest fitting cut at any rune boundary
		bare  cut          // furthest cut within budget, ignoring the closing fence
		used  int          // cost of text[pos:i]
		seen  bool         // text[pos:i] has a visible character
		prev  rune         // the rune before i; a space at pos
		ri    int          // regional indicators ending at prev
		st    = carry      // fence state at lineStart
		lineS = pos
	)
	_, fenceLine := step(st, text[lineS:s.lineEnd(lineS)])
	like := fenceLike(text[lineS:])
	// stateAt is the fence state at i on the current line.
	stateAt := func(i int) fence {
		if !like {
			return st
		}
		f, _ := step(st, text[lineS:i])
		return f
	}
	fits := func(c cut) bool { return c.used+s.closeCost(c.st) <= budget }
	consider := func(c cut, class int, weak bool) {
		if c.used <= budget {
			bare = c
		}
		if !fits(c) {
			return
		}
		if weak {
			poor = c
			return
		}
		word[class] = c
	}
	prev = ' '
	i := pos
	for i < len(text) {
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			j, nl, lastNL := i, 0, -1
			for j < len(text) {
				r2, n2 := utf8.DecodeRuneInString(text[j:])
				if !unicode.IsSpace(r2) {
					break
				}
				if r2 == '\n' {
					nl++
					lastNL = j
				}
				j += n2
			}
			if seen {
				stAt := stateAt(i)
				c := cut{a: i, b: j, used: used, st: stAt, ok: true}
				class := cutSpace
				switch {
				case nl >= 2:
					class = cutParagraph
				case nl == 1:
					class = cutLine
				case isSentenceEnd(prev):
					class = cutSentence
				}
				weak := false
				if nl > 0 {
					c.b = lastNL + 1
					// Ending right after an opening fence line leaves an
					// empty block; starting with the closing line opens one.
					if !st.on() && stAt.on() {
						weak = true
					}
					if stAt.on() {
						if after, isFence := step(stAt, text[c.b:s.lineEnd(c.b)]); isFence && !after.on() {
							weak = true
						}
					}
				} else if fenceLine || fenceAhead(text[j:]) {
					weak = true
				}
				consider(c, class, weak)
			}
			for k := i; k < j; {
				r2, n2 := utf8.DecodeRuneInString(text[k:])
				used += s.cost(n2)
				if r2 == '\n' {
					st, _ = step(st, text[lineS:k])
					lineS = k + 1
					_, fenceLine = step(st, text[lineS:s.lineEnd(lineS)])
					like = fenceLike(text[lineS:])
				}
				k += n2
			}
			i, prev, ri = j, ' ', 0
			if used > budget {
				break
			}
			continue
		}
		if seen {
			stAt := stateAt(i)
			c := cut{a: i, b: i, used: used, st: stAt, ok: true}
			switch {
			case isCJKSentenceEnd(prev) && !isClosingPunct(r):
				consider(c, cutSentence, fenceLine || fenceAhead(text[i:]))
			case isCJKComma(prev) && !isClosingPunct(r):
				consider(c, cutSpace, fenceLine || fenceAhead(text[i:]))
			default:
				if c.used <= budget {
					bare = c
				}
				if fits(c) {
					anyr = c
					if !fenceLine && !fenceAhead(text[i:]) && graphemeBreak(prev, r, ri) {
						good = c
					}
				}
			}
		}
		used += s.cost(n)
		seen = true
		if isRegional(r) {
			ri++
		} else {
			ri = 0
		}
		prev = r
		i += n
		if used > budget {
			break
		}
	}

	if i >= len(text) && used <= budget {
		end, _ := step(st, text[lineS:])
		if used+s.closeCost(end) <= budget {
			return s.piece(open, pos, len(text), end), len(text), end
		}
	}

	c := pickCut(word, budget)
	for _, alt := range []cut{poor, good, anyr} {
		if !c.ok {
			c = alt
		}
	}
	if c.ok {
		return s.piece(open, pos, c.a, c.st), c.b, c.st
	}
	if bare.ok {
		// The closing fence does not fit: the fence is left open.
		return s.piece(open, pos, bare.a, fence{}), bare.b, fence{}
	}
	// Only reachable when the rest is a single rune or the fence cannot be
	// closed: take what fits, at least one rune.
	end := pos
	for u := 0; end < len(text); {
		_, n := utf8.DecodeRuneInString(text[end:])
		if end > pos && u+s.cost(n) > budget {
			break
		}
		u += s.cost(n)
		end += n
	}
	return s.piece(open, pos, end, fence{}), end, fence{}
}

// pickCut takes the best class whose furthest cut fills at least half the
// budget, else the furthest word cut of any class.
func pickCut(word [numCuts]cut, budget int) cut {
	for class := cutParagraph; class >= cutSpace; class-- {
		if c := word[class]; c.ok && 2*c.used >= budget {
			return c
		}
	}
	var best cut
	for _, c := range word {
		if c.ok && (!best.ok || c.a > best.a) {
			best = c
		}
	}
	return best
}

func (s *splitter) piece(open string, pos, end int, st fence) piece {
	p := piece{open: open, body: strings.TrimRightFunc(s.text[pos:end], unicode.IsSpace), start: pos}
	if st.on() {
		p.close = "\n" + st.marker()
	}
	return p
}

// fenceLike reports whether the line starting s could be a fence line.
func fenceLike(s string) bool {
	t := strings.TrimLeft(s, " \t")
	return t != "" && (t[0] == '`' || t[0] == '~')
}

func fenceAhead(s string) bool {
	return strings.HasPrefix(s, "```") || strings.HasPrefix(s, "~~~")
}

func isSentenceEnd(r rune) bool {
	switch r {
	case '.', '!', '?', '…', '。', '！', '？':
		return true
	}
	return false
}

func isCJKSentenceEnd(r rune) bool {
	switch r {
	case '。', '！', '？', '．':
		return true
	}
	return false
}

func isCJKComma(r rune) bool {
	return r == '、' || r == '，'
}

func isClosingPunct(r rune) bool {
	return unicode.Is(unicode.Pe, r) || unicode.Is(unicode.Pf, r) || isCJKSentenceEnd(r) || isCJKComma(r) ||
		r == '"' || r == '\''
}

func isRegional(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }

// graphemeBreak reports whether a cut between prev and r keeps grapheme
// clusters whole, approximately: combining marks, variation selectors, emoji
// modifiers and tags stay with what precedes them, a zero-width joiner with
// both neighbours, and regional indicators in pairs (flags). ri is the
// number of regional indicators ending at prev.
func graphemeBreak(prev, r rune, ri int) bool {
	switch {
	case prev == 0x200D || r == 0x200D:
		return false
	case unicode.Is(unicode.M, r):
		return false
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
		return false
	case r >= 0x1F3FB && r <= 0x1F3FF:
		return false
	case r >= 0xE0020 && r <= 0xE007F:
		return false
	case isRegional(prev) && isRegional(r) && ri%2 == 1:
		return false
	}
	return true
}
