package tokens

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// The pre-split: before byte-pair merging, each encoding cuts text into
// pieces with a regular expression, and no token crosses a piece. The
// tokenizer runs those expressions on a backtracking engine (regexp2, its
// generated matchers) at a few MB/s, quadratic in a long whitespace run.
// The functions below make the same cuts in one pass: each returns the end
// of the piece that starts at i, as the encoding's expression matches it
// there, with the engine's own readings where they differ from the
// expression's (see spaceRun and classSlow). The tests in exact_test.go and
// FuzzCountMatchesTokenizer compare every piece with the tokenizer's.
//
// The text is valid UTF-8 (Count replaces invalid bytes first, as the
// tokenizer does), and i < len(s) is the start of a rune.

// splitter returns the end of the piece of s that starts at i, or i when
// the expression matches nothing there (at a DEL, see classSlow).
type splitter func(s string, i int) int

// Character classes, as the expressions name them, and the two runes the
// engine reads apart. Each rune has exactly one general category, so a
// letter, a mark, a number and a space exclude one another.
const (
	cLetter  = 1 << iota // \p{L}
	cUpper               // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower               // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cNumber              // \p{N}
	cSpace               // \s, which the engine reads as unicode.IsSpace
	cNewline             // \r or \n
	cDel                 // U+007F, see classSlow
)

// classSlow computes a rune's classes from Go's Unicode tables, the tables
// the tokenizer's matchers use.
//
// U+007F (DEL) is marked apart: the engine's ASCII bitmaps leave it out of
// the negated classes ([^\r\n\p{L}\p{N}], [^\s\p{L}\p{N}]) that should
// take it. No alternative then matches at a DEL, and the engine passes
// over it: the tokenizer gives it no token, and neither does Count.
func classSlow(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return cSpace | cNewline
	case r == 0x7f:
		return cDel
	case unicode.IsSpace(r):
		return cSpace
	case unicode.Is(unicode.Lu, r), unicode.Is(unicode.Lt, r):
		return cLetter | cUpper
	case unicode.Is(unicode.Ll, r):
		return cLetter | cLower
	case unicode.Is(unicode.Lm, r), unicode.Is(unicode.Lo, r):
		return cLetter | cUpper | cLower
	case unicode.Is(unicode.M, r):
		return cUpper | cLower
	case unicode.Is(unicode.N, r):
		return cNumber
	}
	return 0
}

// ascii holds the classes of ASCII, bmp those of the Basic Multilingual
// Plane, built on first use (64 KB, a few milliseconds): looking a rune up
// in the Unicode tables takes several binary searches.
var (
	ascii = func() (t [utf8.RuneSelf]uint8) {
		for r := range rune(len(t)) {
			t[r] = classSlow(r)
		}
		return t
	}()
	bmpOnce sync.Once
	bmp     *[1 << 16]uint8
)

func buildBMP() {
	t := new([1 << 16]uint8)
	for r := range rune(len(t)) {
		t[r] = classSlow(r)
	}
	bmp = t
}

// classOf returns the classes of r.
func classOf(r rune) uint8 {
	if r < 1<<16 {
		return bmp[r]
	}
	return classSlow(r)
}

// classAt returns the classes of the rune at s[i] and its width. The
// loops over runs of text look ASCII up in place (the call is not
// inlined) and call it for the rest.
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return ascii[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return classOf(r), w
}

// prefixable reports whether a rune of classes c may stand before a word:
// [^\r\n\p{L}\p{N}] as the engine reads it.
func prefixable(c uint8) bool { return c&(cLetter|cNumber|cNewline|cDel) == 0 }

// symbol reports whether a rune of classes c is in [^\s\p{L}\p{N}] as the
// engine reads it.
func symbol(c uint8) bool { return c&(cSpace|cLetter|cNumber|cDel) == 0 }

// run returns the end of the run of runes from i whose classes meet want.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if ascii[b]&want == 0 {
				break
			}
			i++
			continue
		}
		c, w := classAt(s, i)
		if c&want == 0 {
			break
		}
		i += w
	}
	return i
}

// upTo returns the end of at most n runes of class want from i.
func upTo(s string, i, n int, want uint8) int {
	for ; n > 0 && i < len(s); n-- {
		c, w := classAt(s, i)
		if c&want == 0 {
			break
		}
		i += w
	}
	return i
}

// contraction returns the end of a contraction at i, (?i:'s|'t|'re|'ve|
// 'm|'ll|'d), or i when there is none. The engine folds case as .NET does:
// 'ſ' (U+017F) is an s.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	switch s[i+1] {
	case 's', 'S', 't', 'T', 'm', 'M', 'd', 'D':
		return i + 2
	case 'r', 'R', 'v', 'V':
		if i+2 < len(s) && s[i+2]|0x20 == 'e' {
			return i + 3
		}
	case 'l', 'L':
		if i+2 < len(s) && s[i+2]|0x20 == 'l' {
			return i + 3
		}
	case 0xC5: // ſ is C5 BF
		if i+2 < len(s) && s[i+2] == 0xBF {
			return i + 3
		}
	}
	return i
}

// contractionCased is contraction without case folding ('s|'t|'re|'ve|'m|
// 'll|'d), as r50k_base and p50k_base have it.
func contractionCased(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	switch s[i+1] {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if i+2 < len(s) && s[i+2] == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && s[i+2] == 'l' {
			return i + 3
		}
	}
	return i
}

// Tails of a run of symbols.
const (
	tailNone     = iota
	tailNewlines // [\r\n]*
	tailSlash    // [\r\n/]*
)

// symbols matches ` ?[^\s\p{L}\p{N}]+` followed by the tail, returning -1
// when it does not match. The leading space is taken whenever it is there
// (the engine's loop is atomic).
func symbols(s string, i int, tail int) int {
	if s[i] == ' ' {
		i++
	}
	start := i
	for i < len(s) {
		c, w := uint8(0), 1
		if b := s[i]; b < utf8.RuneSelf {
			c = ascii[b]
		} else {
			c, w = classAt(s, i)
		}
		if !symbol(c) {
			break
		}
		i += w
	}
	if i == start {
		return -1
	}
	for tail != tailNone && i < len(s) && (s[i] == '\r' || s[i] == '\n' || tail == tailSlash && s[i] == '/') {
		i++
	}
	return i
}

// spaceRun matches, at a whitespace rune, `\s*[\r\n]+|\s+(?!\S)|\s+`
// (newlines true) or `\s+(?!\S)|\s+` (newlines false).
//
// For `\s*[\r\n]+` the engine does not give back the whitespace run from
// its end, as the expression reads: it resumes at the run's first \r or \n
// (regexp2's generated matcher uses IndexOfAny there). So "  \n  \n  x" is
// cut "  \n", "  \n", " ", " x", where tiktoken itself cuts "  \n  \n",
// " ", " x". Counts follow the tokenizer Baton links.
func spaceRun(s string, i int, newlines bool) int {
	last, p := i, i
	for p < len(s) {
		if newlines && (s[p] == '\r' || s[p] == '\n') {
			for p < len(s) && (s[p] == '\r' || s[p] == '\n') {
				p++
			}
			return p
		}
		c, w := classAt(s, p)
		if c&cSpace == 0 {
			break
		}
		last = p
		p += w
	}
	switch {
	case p == len(s) || last == i:
		// The run ends the text, or is one rune before a non-space.
		return p
	default:
		// \s+(?!\S): the run but its last rune, which goes with what follows.
		return last
	}
}

// splitO200k cuts as o200k_base's expression:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitO200k(s string, i int) int {
	c0, w0 := classAt(s, i)
	pre := prefixable(c0)
	if pre || c0&(cUpper|cLower) != 0 {
		// The two word alternatives, each tried with the prefix rune and
		// then without it, as the engine backtracks.
		starts := [2]int{i + w0, i}
		from := 0
		if !pre {
			from = 1
		}
		for _, st := range starts[from:] {
			if e := casedWord(s, st); e >= 0 {
				return contraction(s, e)
			}
		}
		for _, st := range starts[from:] {
			if st < len(s) {
				if c, _ := classAt(s, st); c&cUpper != 0 {
					return contraction(s, run(s, run(s, st, cUpper), cLower))
				}
			}
		}
	}
	if c0&cNumber != 0 {
		return upTo(s, i, 3, cNumber)
	}
	if e := symbols(s, i, tailSlash); e >= 0 {
		return e
	}
	return spaceRun(s, i, true)
}

// casedWord matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// at st, returning its end or -1. The first loop is greedy and gives back
// one rune at a time until the second can match: that is at the first
// loop's end when a lowercase letter follows, else at the last rune of the
// first loop that the second also takes (Lm, Lo, M), which then ends the
// match.
func casedWord(s string, st int) int {
	p, lastBoth, lastW := st, -1, 0
	for p < len(s) {
		c, w := uint8(0), 1
		if b := s[p]; b < utf8.RuneSelf {
			c = ascii[b]
		} else {
			c, w = classAt(s, p)
		}
		if c&cUpper == 0 {
			break
		}
		if c&cLower != 0 {
			lastBoth, lastW = p, w
		}
		p += w
	}
	if p < len(s) {
		if c, _ := classAt(s, p); c&cLower != 0 {
			return run(s, p, cLower)
		}
	}
	if lastBoth >= 0 {
		return lastBoth + lastW
	}
	return -1
}

// splitCl100k cuts as cl100k_base's expression:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCl100k(s string, i int) int {
	if e := contraction(s, i); e > i {
		return e
	}
	c0, w0 := classAt(s, i)
	if c0&cLetter != 0 {
		return run(s, i, cLetter)
	}
	if prefixable(c0) && i+w0 < len(s) {
		if c, _ := classAt(s, i+w0); c&cLetter != 0 {
			return run(s, i+w0, cLetter)
		}
	}
	if c0&cNumber != 0 {
		return upTo(s, i, 3, cNumber)
	}
	if e := symbols(s, i, tailNewlines); e >= 0 {
		return e
	}
	return spaceRun(s, i, true)
}

// splitP50k cuts as r50k_base's and p50k_base's expression:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitP50k(s string, i int) int {
	if e := contractionCased(s, i); e > i {
		return e
	}
	st := i
	if s[st] == ' ' {
		st++ // taken for good: the engine's loop is atomic
	}
	if st < len(s) {
		switch c, _ := classAt(s, st); {
		case c&cLetter != 0:
			return run(s, st, cLetter)
		case c&cNumber != 0:
			return run(s, st, cNumber)
		}
	}
	if e := symbols(s, i, tailNone); e >= 0 {
		return e
	}
	return spaceRun(s, i, false)
}
