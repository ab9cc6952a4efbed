// Package tokens counts LLM tokens offline.
//
// Counting uses the byte-pair vocabularies of github.com/tiktoken-go/tokenizer,
// compiled into the binary: nothing is downloaded at run time. The context
// manager uses a Counter to measure what it appends to a conversation, and
// the tools use one to fit their results to a token budget.
//
// The tokenizer cuts text into pieces with a regular expression on a
// backtracking engine before it merges bytes; that pre-split was three
// quarters of an agent turn's overhead (0.45 ms for a 4 KB tool result).
// Count makes the same cuts with a hand-written scanner (split.go) and
// merges with the tokenizer's own ranks (bpe.go): the count is the
// tokenizer's, in linear time.
package tokens

import (
	"strings"
	"sync"
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
	enc *encoding
}

var _ Counter = (*BPE)(nil)

// encoding is one encoding's codec and, read from it on first use, its
// ranks (a few tens of milliseconds and about 10 MB for o200k_base).
type encoding struct {
	codec tokenizer.Codec
	once  sync.Once
	vocab *vocab // nil for an encoding without a pre-split here: the codec counts
}

func (e *encoding) load() *vocab {
	e.once.Do(func() {
		bmpOnce.Do(buildBMP)
		e.vocab = loadVocab(e.codec)
	})
	return e.vocab
}

// encodings caches one codec per encoding: building one loads a vocabulary
// of up to 200k entries.
var (
	encodingsMu sync.Mutex
	encodings   = map[string]*encoding{} // guarded by encodingsMu; by encoding name
)

func encodingFor(name tokenizer.Encoding) (*encoding, error) {
	encodingsMu.Lock()
	defer encodingsMu.Unlock()
	if e, ok := encodings[string(name)]; ok {
		return e, nil
	}
	c, err := tokenizer.Get(name)
	if err != nil {
		return nil, err
	}
	e := &encoding{codec: c}
	encodings[string(name)] = e
	return e, nil
}

// New returns a counter for a named encoding ("o200k_base", "cl100k_base",
// "p50k_base", "r50k_base").
func New(name string) (*BPE, error) {
	e, err := encodingFor(tokenizer.Encoding(name))
	if err != nil {
		return nil, err
	}
	return &BPE{enc: e}, nil
}

// Default returns the o200k_base counter.
func Default() *BPE {
	b, err := New(DefaultEncoding)
	if err != nil {
		panic("tokens: o200k_base is compiled in: " + err.Error())
	}
	return b
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
	b, err := New(c.GetName())
	if err != nil {
		return Default()
	}
	return b
}

// Encoding names the encoding in use.
func (b *BPE) Encoding() string { return b.enc.codec.GetName() }

// Count returns the number of tokens in s, the count the tokenizer gives:
// the same pieces, merged with the same ranks, in time linear in len(s)
// (the tokenizer's own pre-split is quadratic in a whitespace run: 20 kB
// of " \n" took it a second). Special-token text such as "<|endoftext|>" is
// counted as ordinary text. Invalid UTF-8 is counted as the tokenizer
// counts it, each invalid byte as U+FFFD.
func (b *BPE) Count(s string) int {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // what the tokenizer's engine matches on
	}
	if v := b.enc.load(); v != nil {
		return v.count(s)
	}
	if s == "" {
		return 0
	}
	n, err := b.enc.codec.Count(s)
	if err != nil {
		return len(s) // an upper bound: every token is at least one byte
	}
	return n
}
