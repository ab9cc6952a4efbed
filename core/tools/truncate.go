package tools

import (
	"strings"
	"unicode/utf8"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/tokens"
)

// Mode chooses which part of a text Truncate keeps.
type Mode int

const (
	// Head keeps the beginning (Read, ReadDocument, Grep).
	Head Mode = iota
	// HeadTail keeps the beginning and the end (Bash: errors are usually
	// at the end).
	HeadTail
)

// bytesPerTokenCap bounds how much text is tokenized to fit a budget: a text
// longer than budget×8 bytes is pre-cut to that length before counting
// (English averages about 4 bytes a token), so a huge text costs no more
// than a few counts of twice the budget.
const bytesPerTokenCap = 8

// Truncate returns text unchanged (cut false) when it fits budgetTokens, and
// otherwise a shortened text with a note, in tx's locale (nil: English),
// saying how much was cut (cut true).
// The result never counts more than budgetTokens with c, and it is valid
// UTF-8 whenever text is. Cuts fall on line boundaries when that keeps at
// least half of what fits, else on rune boundaries.
func Truncate(text string, budgetTokens int, mode Mode, c tokens.Counter, tx *catalog.Texts) (string, bool) {
	if mode == HeadTail {
		return headTail(text, budgetTokens, c, false, func(cut int) string {
			return "\n" + tx.Fill("tools.truncate.cut_middle", "n", itoa(cut)) + "\n"
		})
	}
	return head(text, budgetTokens, c, func(kept int) string {
		return "\n" + tx.Fill("tools.truncate.cut_head", "kept", itoa(kept), "total", itoa(len(text)))
	})
}

// fits reports whether text counts at most budget tokens, without counting
// texts too long to possibly fit.
func fits(text string, budget int, c tokens.Counter) bool {
	if budget < 0 || len(text) > budget*bytesPerTokenCap {
		return false
	}
	return c.Count(text) <= budget
}

// head keeps a prefix of text and appends note(bytes kept), all within
// budget.
func head(text string, budget int, c tokens.Counter, note func(kept int) string) (string, bool) {
	if fits(text, budget, c) {
		return text, false
	}
	reserve := c.Count(note(len(text)))
	for reserve <= budget {
		n := fitHead(text, budget-reserve, c)
		out := text[:n] + note(n)
		over := c.Count(out) - budget
		if over <= 0 {
			return out, true
		}
		reserve += over
	}
	return noteOnly(note(0), budget, c), true
}

// headTail keeps a prefix and a suffix of text with note(bytes cut) between
// them, all within budget. With force it cuts (and notes) even a text that
// fits.
func headTail(text string, budget int, c tokens.Counter, force bool, note func(cut int) string) (string, bool) {
	if !force && fits(text, budget, c) {
		return text, false
	}
	reserve := c.Count(note(len(text)))
	for reserve <= budget {
		avail := budget - reserve
		h := fitHead(text, avail/2, c)
		rest := text[h:]
		t := h + fitTail(rest, avail-c.Count(text[:h]), c)
		out := text[:h] + note(t-h) + text[t:]
		over := c.Count(out) - budget
		if over <= 0 {
			return out, true
		}
		reserve += over
	}
	return noteOnly(note(len(text)), budget, c), true
}

// noteOnly is the last resort when not even the note fits.
func noteOnly(note string, budget int, c tokens.Counter) string {
	return note[:fitHead(note, budget, c)]
}

// fitHead returns the length of a prefix of text that counts at most budget
// tokens: close to the longest such prefix, cut by snapHead.
func fitHead(text string, budget int, c tokens.Counter) int {
	if budget <= 0 {
		return 0
	}
	n := snapHead(text, min(len(text), budget*bytesPerTokenCap))
	for n > 0 {
		k := c.Count(text[:n])
		if k <= budget {
			return n
		}
		// Shrink in proportion, with a 2% margin, so that a few counts
		// suffice.
		target := int(int64(n) * int64(budget) / int64(k))
		target -= target / 50
		if target >= n {
			target = n - 1
		}
		n = snapHead(text, target)
	}
	return 0
}

// fitTail returns the start of a suffix of text that counts at most budget
// tokens: close to the longest such suffix, cut by snapTail.
func fitTail(text string, budget int, c tokens.Counter) int {
	if budget <= 0 {
		return len(text)
	}
	start := snapTail(text, max(0, len(text)-budget*bytesPerTokenCap))
	for start < len(text) {
		m := len(text) - start
		k := c.Count(text[start:])
		if k <= budget {
			return start
		}
		target := int(int64(m) * int64(budget) / int64(k))
		target -= target / 50
		if target >= m {
			target = m - 1
		}
		start = snapTail(text, len(text)-target)
	}
	return len(text)
}

// snapHead moves a cut at n (text[:n] is kept) back to a rune start, and
// further back to just after a newline when that keeps at least half.
func snapHead(text string, n int) int {
	if n >= len(text) {
		return len(text)
	}
	if n <= 0 {
		return 0
	}
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(text[n]); i++ {
		n--
	}
	if i := strings.LastIndexByte(text[:n], '\n'); i >= 0 && i+1 >= n/2 {
		n = i + 1
	}
	return n
}

// snapTail moves a cut at start (text[start:] is kept) forward to a rune
// start, and further forward to just after a newline when that keeps at
// least half.
func snapTail(text string, start int) int {
	if start <= 0 {
		return 0
	}
	if start >= len(text) {
		return len(text)
	}
	for i := 0; i < utf8.UTFMax-1 && start < len(text) && !utf8.RuneStart(text[start]); i++ {
		start++
	}
	if start > 0 && start < len(text) && text[start-1] != '\n' {
		kept := len(text) - start
		if j := strings.IndexByte(text[start:], '\n'); j >= 0 && kept-(j+1) >= kept/2 {
			start += j + 1
		}
	}
	return start
}
