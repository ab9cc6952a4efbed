package llm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"sync"
	"unsafe"
)

// A movement's request is an append-only list of messages between
// compactions, sent again on every turn. msgCache keeps the JSON of the
// messages a Client already encoded so that a turn encodes only what was
// appended or rewritten (masked, compacted) since: the per-turn cost
// follows the new content, and the rest is one copy of bytes.
//
// An entry is found by the identity of the message's strings (their data
// pointers and lengths: Go strings are immutable, and the entry holds the
// strings, so their memory is not reused while it lives) and is used only
// when the message equals, field by field, the copy kept with it — equal
// strings with the same data compare in constant time. So a cached
// encoding is always that of an equal message: the body is byte-identical
// to encoding the whole request afresh (TestCachedBodyMatchesFresh).
//
// The cache is bounded (msgCacheBytes of encoded JSON): past the bound the
// entries used longest ago go first, and entries no recent request used
// go (staleAfter). It is safe for concurrent use; the
// zero value is ready.
type msgCache struct {
	mu      sync.Mutex // guards the fields below
	entries map[msgKey]*msgEntry
	// seqs holds, by the key of a request's first message, the entries of
	// that request in order: the next request of the same movement finds
	// its messages by position, comparing without hashing.
	seqs  map[msgKey][]*msgEntry
	bytes int    // the sum of len(entry.json)
	gen   uint64 // counts the requests encoded; entries record the last that used them
	limit int    // the bound on bytes; 0 means msgCacheBytes
}

// msgCacheBytes bounds the JSON a Client keeps: a few movements of a
// million tokens (3.8 MB each), many of 100k.
const msgCacheBytes = 32 << 20

// Every staleEvery requests, the entries no request used in the last
// staleAfter go, so that a quiet process does not keep the JSON of
// movements long over (a movement waiting on a tool meanwhile encodes its
// messages again).
const (
	staleEvery = 256
	staleAfter = 1024
)

// msgKey finds a message's entry: its role, its counts of parts and calls,
// and the identity of the strings that make it up.
type msgKey struct {
	role                  string
	parts, calls          int
	content, callID, name strID
	first, second         strID // the first call's id and arguments, or the first part's text and image
}

// strID is the identity of a string or byte slice: its data and length.
type strID struct {
	p *byte
	n int
}

func idOf(s string) strID      { return strID{unsafe.StringData(s), len(s)} }
func idOfBytes(b []byte) strID { return strID{unsafe.SliceData(b), len(b)} }

func keyOf(m *Message) msgKey {
	k := msgKey{role: m.Role, parts: len(m.Parts), calls: len(m.ToolCalls),
		content: idOf(m.Content), callID: idOf(m.ToolCallID), name: idOf(m.Name)}
	switch {
	case len(m.ToolCalls) > 0:
		k.first, k.second = idOf(m.ToolCalls[0].ID), idOf(m.ToolCalls[0].Arguments)
	case len(m.Parts) > 0:
		k.first, k.second = idOf(m.Parts[0].Text), idOfBytes(m.Parts[0].ImageData)
	}
	return k
}

type msgEntry struct {
	msg  Message // a copy owning its slices: the caller may change theirs in place
	json []byte
	used uint64
}

// ownCopy returns m with slices of its own, so that a caller changing its
// slices in place cannot change the cached copy.
func ownCopy(m Message) Message {
	m.ToolCalls = slices.Clone(m.ToolCalls)
	if m.Parts != nil {
		m.Parts = slices.Clone(m.Parts)
		for i := range m.Parts {
			m.Parts[i].ImageData = bytes.Clone(m.Parts[i].ImageData)
		}
	}
	return m
}

// sameMessage reports whether a and b encode alike: equal in every field.
func sameMessage(a, b *Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.ToolCallID != b.ToolCallID || a.Name != b.Name || a.Reasoning != b.Reasoning ||
		len(a.ToolCalls) != len(b.ToolCalls) || len(a.Parts) != len(b.Parts) {
		return false
	}
	for i := range a.ToolCalls {
		if a.ToolCalls[i] != b.ToolCalls[i] {
			return false
		}
	}
	for i := range a.Parts {
		p, q := &a.Parts[i], &b.Parts[i]
		if p.Type != q.Type || p.Text != q.Text || p.ImageMIME != q.ImageMIME || !bytes.Equal(p.ImageData, q.ImageData) {
			return false
		}
	}
	return true
}

// messages returns the JSON of each of msgs, from the cache where it has
// an equal message and encoded (and cached) otherwise.
func (c *msgCache) messages(msgs []Message) ([][]byte, error) {
	out := make([][]byte, len(msgs))
	if len(msgs) == 0 {
		return out, nil
	}
	seq := make([]*msgEntry, len(msgs))
	first := keyOf(&msgs[0])
	var missing []int
	c.mu.Lock()
	c.gen++
	gen := c.gen
	last := c.seqs[first]
	for i := range msgs {
		e := (*msgEntry)(nil)
		if i < len(last) && sameMessage(&last[i].msg, &msgs[i]) {
			e = last[i]
		} else if m, ok := c.entries[keyOf(&msgs[i])]; ok && sameMessage(&m.msg, &msgs[i]) {
			e = m
		}
		if e == nil {
			missing = append(missing, i)
			continue
		}
		e.used = gen
		out[i], seq[i] = e.json, e
	}
	c.mu.Unlock()
	for _, i := range missing {
		js, err := encodeMessage(msgs[i])
		if err != nil {
			return nil, messageError(i, err)
		}
		out[i] = js
		seq[i] = &msgEntry{msg: ownCopy(msgs[i]), json: js, used: gen}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries, c.seqs = make(map[msgKey]*msgEntry), make(map[msgKey][]*msgEntry)
	}
	for _, i := range missing {
		k := keyOf(&msgs[i])
		if old, ok := c.entries[k]; ok {
			c.bytes -= len(old.json)
		}
		c.entries[k] = seq[i]
		c.bytes += len(seq[i].json)
	}
	if len(c.seqs) >= maxSeqs {
		clear(c.seqs)
	}
	c.seqs[first] = seq
	c.evict(gen)
	return out, nil
}

// maxSeqs bounds the movements whose order the cache remembers.
const maxSeqs = 256

// evict drops the entries used longest ago until the cache is within
// three quarters of its bound, when it is past it. Entries the current
// request (gen) uses stay. c.mu is held.
func (c *msgCache) evict(gen uint64) {
	limit := c.limit
	if limit == 0 {
		limit = msgCacheBytes
	}
	if gen%staleEvery == 0 {
		// Movements that ended leave their messages: they go once no
		// request has used them for staleAfter requests.
		for k, e := range c.entries {
			if e.used+staleAfter < gen {
				c.bytes -= len(e.json)
				delete(c.entries, k)
			}
		}
		clear(c.seqs)
	}
	if c.bytes <= limit {
		return
	}
	type aged struct {
		key  msgKey
		used uint64
	}
	all := make([]aged, 0, len(c.entries))
	for k, e := range c.entries {
		all = append(all, aged{k, e.used})
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.used, b.used) })
	// The sequences may hold evicted entries: they are rebuilt by the
	// next requests.
	clear(c.seqs)
	for _, a := range all {
		if c.bytes <= limit*3/4 || a.used == gen {
			return
		}
		c.bytes -= len(c.entries[a.key].json)
		delete(c.entries, a.key)
	}
}

// len returns the number of cached messages.
func (c *msgCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// encodeMessage returns the JSON of one message, as encoding the whole
// request would write it.
func encodeMessage(m Message) ([]byte, error) {
	bm, err := bodyMessageOf(m)
	if err != nil {
		return nil, err
	}
	return marshalMessage(bm)
}

// marshalMessage is bm's JSON as encoding the whole request writes it.
func marshalMessage(bm bodyMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(bm); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
