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
// expression's (see spaceRun and del). The tests in exact_test.go and
// FuzzCountMatchesTokenizer compare every piece with the tokenizer's.
//
// The text is valid UTF-8 (Count replaces invalid bytes first, as the
// tokenizer does), and i < len(s) is the start of a rune.

// splitter returns the end of the piece of s that starts at i, or i when
// the expression matches nothing there (at a DEL, see del).
type splitter func(s string, i int) int

// Character classes, as the expressions name them. Each rune has exactly
// one general category, so a letter, a mark, a number and a space exclude
// one another.
const (
	cLetter = 1 << iota // \p{L}
	cUpper              // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower              // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cNumber             // \p{N}
	cSpace              // \s, which the engine reads as unicode.IsSpace
)

// classSlow computes a rune's classes from Go's Unicode tables, the tables
// the tokenizer's matchers use.
func classSlow(r rune) uint8 {
	switch {
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

// bmp holds the classes of the Basic Multilingual Plane, built on first
// use (64 KB, a few milliseconds): looking a rune up in the Unicode tables
// takes several binary searches.
var (
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

// at returns the rune at s[i] and its width.
func at(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// del is U+007F, which the engine's ASCII bitmaps leave out of the
// negated classes ([^\r\n\p{L}\p{N}], [^\s\p{L}\p{N}]) that should take
// it. No alternative then matches at a DEL, and the engine passes over it:
// the tokenizer gives it no token, and neither does Count.
const del = 0x7f

// prefixable reports whether r (of classes c) may stand before a word:
// [^\r\n\p{L}\p{N}] as the engine reads it.
func prefixable(r rune, c uint8) bool {
	return r != '\r' && r != '\n' && r != del && c&(cLetter|cNumber) == 0
}

// symbol reports whether r (of classes c) is in [^\s\p{L}\p{N}] as the
// engine reads it.
func symbol(r rune, c uint8) bool { return r != del && c&(cSpace|cLetter|cNumber) == 0 }

// run returns the end of the run of runes from i whose classes meet want.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		r, w := at(s, i)
		if classOf(r)&want == 0 {
			break
		}
		i += w
	}
	return i
}

// upTo returns the end of at most n runes of class want from i.
func upTo(s string, i, n int, want uint8) int {
	for ; n > 0 && i < len(s); n-- {
		r, w := at(s, i)
		if classOf(r)&want == 0 {
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
		r, w := at(s, i)
		if !symbol(r, classOf(r)) {
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
		r, w := at(s, p)
		if classOf(r)&cSpace == 0 {
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
	r0, w0 := at(s, i)
	c0 := classOf(r0)
	pre := prefixable(r0, c0)
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
				if r, _ := at(s, st); classOf(r)&cUpper != 0 {
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
		r, w := at(s, p)
		c := classOf(r)
		if c&cUpper == 0 {
			break
		}
		if c&cLower != 0 {
			lastBoth, lastW = p, w
		}
		p += w
	}
	if p < len(s) {
		if r, _ := at(s, p); classOf(r)&cLower != 0 {
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
	r0, w0 := at(s, i)
	c0 := classOf(r0)
	if c0&cLetter != 0 {
		return run(s, i, cLetter)
	}
	if prefixable(r0, c0) && i+w0 < len(s) {
		if r, _ := at(s, i+w0); classOf(r)&cLetter != 0 {
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
		r, _ := at(s, st)
		switch c := classOf(r); {
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
