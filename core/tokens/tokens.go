// Package tokens counts LLM tokens offline.
//
// Counting uses github.com/tiktoken-go/tokenizer, whose BPE vocabularies are
// compiled into the binary: nothing is downloaded at run time. The context
// manager uses a Counter to measure what it appends to a conversation, and
// the tools use one to fit their results to a token budget.
package tokens

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// Counter counts the tokens of a text. Implementations are safe for
// concurrent use and never under-count on failure.
type Counter interface {
	Count(s string) int
}

// DefaultEncoding is used for models the tokenizer does not know (local
// models behind an OpenAI-compatible endpoint, newer OpenAI models).
const DefaultEncoding = "o200k_base"

// BPE counts with one of tiktoken's byte-pair encodings. It is safe for
// concurrent use.
type BPE struct {
	codec tokenizer.Codec
	memo  *memo
}

// memo remembers the token counts of short pieces of text, shared by every
// counter of one encoding: the tokenizer's pre-split pattern runs on a
// backtracking regular-expression engine at a few MB/s, while the pieces of
// real text (words, identifiers, punctuation) repeat endlessly.
type memo struct {
	mu     sync.Mutex
	counts map[string]int // guarded by mu
}

// Bounds of the memo: pieces longer than memoPiece bytes are not kept, and
// the memo is emptied when it reaches memoEntries.
const (
	memoPiece   = 48
	memoEntries = 1 << 16
)

var _ Counter = (*BPE)(nil)

// codecs caches one codec per encoding: building one loads a vocabulary of
// up to 200k entries.
var (
	codecsMu sync.Mutex
	codecs   = map[tokenizer.Encoding]tokenizer.Codec{} // guarded by codecsMu
	memos    = map[string]*memo{}                       // guarded by codecsMu; by encoding name
)

// memoFor returns the memo shared by the counters of encoding name.
func memoFor(name string) *memo {
	codecsMu.Lock()
	defer codecsMu.Unlock()
	m, ok := memos[name]
	if !ok {
		m = &memo{counts: make(map[string]int)}
		memos[name] = m
	}
	return m
}

func codecFor(enc tokenizer.Encoding) (tokenizer.Codec, error) {
	codecsMu.Lock()
	defer codecsMu.Unlock()
	if c, ok := codecs[enc]; ok {
		return c, nil
	}
	c, err := tokenizer.Get(enc)
	if err != nil {
		return nil, err
	}
	codecs[enc] = c
	return c, nil
}

// New returns a counter for a named encoding ("o200k_base", "cl100k_base",
// "p50k_base", "r50k_base").
func New(encoding string) (*BPE, error) {
	c, err := codecFor(tokenizer.Encoding(encoding))
	if err != nil {
		return nil, err
	}
	return &BPE{codec: c, memo: memoFor(c.GetName())}, nil
}

// Default returns the o200k_base counter.
func Default() *BPE {
	c, err := codecFor(DefaultEncoding)
	if err != nil {
		panic("tokens: o200k_base is compiled in: " + err.Error())
	}
	return &BPE{codec: c, memo: memoFor(c.GetName())}
}

// ForModel returns the counter for an OpenAI model name ("gpt-4o",
// "gpt-4.1-mini", "gpt-4"), falling back to o200k_base for any model the
// tokenizer does not know. A provider prefix ("openai/gpt-4o") is ignored.
func ForModel(model string) *BPE {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	c, err := tokenizer.ForModel(tokenizer.Model(model))
	if err != nil {
		return Default()
	}
	// tokenizer.ForModel builds a fresh codec; share the cached one.
	if cached, err := codecFor(tokenizer.Encoding(c.GetName())); err == nil {
		c = cached
	}
	return &BPE{codec: c, memo: memoFor(c.GetName())}
}

// Encoding names the encoding in use.
func (b *BPE) Encoding() string { return b.codec.GetName() }

// Count returns the number of tokens in s. Special-token text such as
// "<|endoftext|>" is counted as ordinary text. Should the tokenizer fail, it
// returns len(s), an upper bound (every token is at least one byte).
//
// Whitespace runs longer than maxSpaceRun bytes are counted in pieces: the
// tokenizer's pre-split pattern backtracks over whitespace in quadratic
// time (20 kB of " \n" takes about a second), and command output can be
// megabytes of it. The count may then differ from the exact one by about a
// token per piece.
//
// The text is counted piece by piece, cutting before every space that
// follows a non-space: the tokenizer's pre-split never joins a non-space
// with a following space, so the sum is the exact count, and each piece's
// count is remembered (see memo).
func (b *BPE) Count(s string) int {
	n := 0
	start := 0
	run := 0 // length of the whitespace run ending at i
	prevSpace := true
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		space := unicode.IsSpace(r)
		if r == ' ' && !prevSpace && i > start {
			n += b.piece(s[start:i])
			start = i
		}
		prevSpace = space
		i += size
		if !space {
			run = 0
			continue
		}
		run += size
		if run >= maxSpaceRun {
			n += b.piece(s[start:i])
			start, run = i, 0
		}
	}
	return n + b.piece(s[start:])
}

// piece counts one piece, through the memo when it is short.
func (b *BPE) piece(s string) int {
	if len(s) > memoPiece {
		return b.count(s)
	}
	b.memo.mu.Lock()
	n, ok := b.memo.counts[s]
	b.memo.mu.Unlock()
	if ok {
		return n
	}
	n = b.count(s)
	b.memo.mu.Lock()
	defer b.memo.mu.Unlock()
	if len(b.memo.counts) >= memoEntries {
		clear(b.memo.counts)
	}
	b.memo.counts[strings.Clone(s)] = n
	return n
}

// maxSpaceRun bounds the whitespace the tokenizer sees at once.
const maxSpaceRun = 64

func (b *BPE) count(s string) int {
	if s == "" {
		return 0
	}
	n, err := b.codec.Count(s)
	if err != nil {
		return len(s)
	}
	return n
}
