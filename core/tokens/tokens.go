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
}

var _ Counter = (*BPE)(nil)

// codecs caches one codec per encoding: building one loads a vocabulary of
// up to 200k entries.
var (
	codecsMu sync.Mutex
	codecs   = map[tokenizer.Encoding]tokenizer.Codec{} // guarded by codecsMu
)

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
	return &BPE{codec: c}, nil
}

// Default returns the o200k_base counter.
func Default() *BPE {
	c, err := codecFor(DefaultEncoding)
	if err != nil {
		panic("tokens: o200k_base is compiled in: " + err.Error())
	}
	return &BPE{codec: c}
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
	return &BPE{codec: c}
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
func (b *BPE) Count(s string) int {
	n := 0
	start := 0
	run := 0 // length of the whitespace run ending at i
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if !unicode.IsSpace(r) {
			run = 0
			i += size
			continue
		}
		run += size
		i += size
		if run >= maxSpaceRun {
			n += b.count(s[start:i])
			start, run = i, 0
		}
	}
	return n + b.count(s[start:])
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
