package tokens

import (
	"math"

	"github.com/tiktoken-go/tokenizer"
)

// vocab is one encoding's merge ranks and pre-split: what Count needs to
// count as the tokenizer does, without its regular-expression engine.
type vocab struct {
	tiny  tinyRanks         // the ranks of tokens of up to 5 bytes
	short shortRanks        // of 6 to 8 bytes
	long  map[string]uint32 // of the longer ones
	split splitter
}

// shortRanks is an open-addressing table of the tokens of up to 8 bytes,
// their bytes held in the slot: a lookup is one cache line where a Go map
// of strings touches three, and lookups, most of them cache misses when
// the text is new, are most of counting.
type shortRanks struct {
	slots []shortSlot // a power of two, at most three quarters full
	shift uint        // 64 - log2(len(slots))
}

type shortSlot struct {
	key  uint64 // the token's bytes, little-endian
	rank uint32
	n    uint32 // the token's length; 0 for an empty slot
}

// pack returns the bytes of s (at most 8) as a little-endian word.
func pack(s string) uint64 {
	var k uint64
	for i := len(s) - 1; i >= 0; i-- {
		k = k<<8 | uint64(s[i])
	}
	return k
}

func (t *shortRanks) home(key uint64, n int) uint64 {
	return ((key + uint64(n)) * 0x9E3779B97F4A7C15) >> t.shift
}

func (t *shortRanks) get(s string) uint32 {
	key, mask := pack(s), uint64(len(t.slots)-1)
	for i := t.home(key, len(s)); ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.n == 0 {
			return noRank
		}
		if sl.key == key && sl.n == uint32(len(s)) {
			return sl.rank
		}
	}
}

func (t *shortRanks) put(s string, rank uint32) {
	key, mask := pack(s), uint64(len(t.slots)-1)
	i := t.home(key, len(s))
	for t.slots[i].n != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = shortSlot{key, rank, uint32(len(s))}
}

// tinyRanks is shortRanks for tokens of up to 5 bytes in 8-byte slots —
// the bytes, the length and the rank in one word — so that the tokens
// most lookups are for (the pairs that merging tries) fill 1 MB, not 4.
type tinyRanks struct {
	slots []uint64 // a power of two, at most three quarters full; 0 is empty
	shift uint
}

const (
	tinyMax     = 5
	tinyKeyBits = 8*tinyMax + 3 // the bytes and the length
	tinyKeyMask = 1<<tinyKeyBits - 1
)

func tinyKey(s string) uint64 { return pack(s) | uint64(len(s))<<(8*tinyMax) }

func (t *tinyRanks) home(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> t.shift }

func (t *tinyRanks) get(s string) uint32 {
	key, mask := tinyKey(s), uint64(len(t.slots)-1)
	for i := t.home(key); ; i = (i + 1) & mask {
		sl := t.slots[i]
		if sl == 0 {
			return noRank
		}
		if sl&tinyKeyMask == key {
			return uint32(sl >> tinyKeyBits)
		}
	}
}

func (t *tinyRanks) put(s string, rank uint32) {
	key, mask := tinyKey(s), uint64(len(t.slots)-1)
	i := t.home(key)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = key | uint64(rank)<<tinyKeyBits
}

// tableBits returns the log2 of a table's slots for n entries.
func tableBits(n int) uint {
	bits := uint(1)
	for 3<<bits < 4*n {
		bits++
	}
	return bits
}

func newTinyRanks(n int) tinyRanks {
	bits := tableBits(n)
	return tinyRanks{slots: make([]uint64, 1<<bits), shift: 64 - bits}
}

// newShortRanks returns a table for up to n tokens.
func newShortRanks(n int) shortRanks {
	bits := tableBits(n)
	return shortRanks{slots: make([]shortSlot, 1<<bits), shift: 64 - bits}
}

// splitterFor returns the pre-split of a named encoding, nil for one this
// package does not know.
func splitterFor(name string) splitter {
	switch name {
	case "o200k_base":
		return splitO200k
	case "cl100k_base":
		return splitCl100k
	case "r50k_base", "p50k_base", "p50k_edit":
		return splitP50k
	}
	return nil
}

// maxGap bounds the run of ids without a token that loadVocab passes over
// before it takes the vocabulary to be read (the encodings' ids are dense;
// special tokens sit a few ids past the last one).
const maxGap = 1024

// loadVocab reads c's vocabulary through its public Decode, one id at a
// time, so the ranks are the tokenizer's own. It returns nil for an
// encoding whose pre-split this package does not have.
func loadVocab(c tokenizer.Codec) *vocab {
	split := splitterFor(c.GetName())
	if split == nil {
		return nil
	}
	type token struct {
		s  string
		id uint32
	}
	var tiny, short []token
	v := &vocab{long: make(map[string]uint32), split: split}
	for id, gap := uint(0), 0; gap < maxGap && id < math.MaxUint32; id++ {
		tok, err := c.Decode([]uint{id})
		if err != nil || tok == "" {
			gap++
			continue
		}
		gap = 0
		switch {
		case len(tok) > 8:
			v.long[tok] = uint32(id)
		case len(tok) > tinyMax || id >= 1<<(64-tinyKeyBits):
			short = append(short, token{tok, uint32(id)})
		default:
			tiny = append(tiny, token{tok, uint32(id)})
		}
	}
	v.tiny, v.short = newTinyRanks(len(tiny)), newShortRanks(len(short))
	for _, t := range tiny {
		v.tiny.put(t.s, t.id)
	}
	for _, t := range short {
		v.short.put(t.s, t.id)
	}
	return v
}

// count returns the number of tokens of s, valid UTF-8.
func (v *vocab) count(s string) int {
	n := 0
	for i := 0; i < len(s); {
		e := v.split(s, i)
		if e <= i { // no piece starts here: the tokenizer passes over it
			_, w := classAt(s, i)
			i += w
			continue
		}
		n += v.piece(s[i:e])
		i = e
	}
	return n
}

// noRank marks a pair that does not merge.
const noRank = math.MaxUint32

// heapFrom is the piece length from which merging keeps its candidates in
// a heap: the scan is quadratic, and a piece can be megabytes of one
// letter.
const heapFrom = 96

// piece returns the number of tokens byte-pair encoding makes of one piece.
func (v *vocab) piece(p string) int {
	if v.rank(p) != noRank {
		return 1
	}
	if len(p) < heapFrom {
		return v.scanMerge(p)
	}
	return v.heapMerge(p)
}

// rank returns the rank of the token p, noRank when p is none.
func (v *vocab) rank(p string) uint32 {
	switch {
	case len(p) <= tinyMax:
		return v.tiny.get(p)
	case len(p) <= 8:
		return v.short.get(p)
	}
	if r, ok := v.long[p]; ok {
		return r
	}
	return noRank
}

// scanMerge merges, as tiktoken does, the adjacent pair of lowest rank
// (the leftmost among equals) until no pair is a token, and returns the
// number of parts left. Each step scans the parts.
func (v *vocab) scanMerge(p string) int {
	type part struct {
		at   int
		rank uint32 // of this part joined with the next
	}
	var buf [heapFrom + 1]part
	parts := buf[:len(p)+1]
	for i := range parts {
		parts[i] = part{i, noRank}
	}
	// pair returns the rank of parts i and i+1+skip joined.
	pair := func(i, skip int) uint32 {
		if i+skip+2 < len(parts) {
			return v.rank(p[parts[i].at:parts[i+skip+2].at])
		}
		return noRank
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = pair(i, 0)
	}
	for len(parts) > 1 {
		best, at := uint32(noRank), 0
		for i, q := range parts[:len(parts)-1] {
			if q.rank < best {
				best, at = q.rank, i
			}
		}
		if best == noRank {
			break
		}
		parts[at].rank = pair(at, 1)
		if at > 0 {
			parts[at-1].rank = pair(at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}

// heapMerge merges as scanMerge does in O(n log n): the parts are a linked
// list, and the candidate pairs a heap ordered by rank, then position, so
// the leftmost of equal ranks merges first; a candidate whose pair has
// changed since it was pushed is passed over.
func (v *vocab) heapMerge(p string) int {
	type node struct {
		prev, next int32 // -1 at the ends
		rank       uint32
	}
	n := int32(len(p))
	nodes := make([]node, n+1)
	for i := range nodes {
		nodes[i] = node{int32(i) - 1, int32(i) + 1, noRank}
	}
	nodes[n].next = -1
	rankAt := func(i int32) uint32 {
		j := nodes[i].next
		if j < 0 {
			return noRank
		}
		k := nodes[j].next
		if k < 0 {
			return noRank
		}
		return v.rank(p[i:k])
	}
	h := make(pairHeap, 0, n)
	for i := int32(0); i+2 <= n; i++ {
		if r := rankAt(i); r != noRank {
			nodes[i].rank = r
			h = append(h, pair{r, i})
		}
	}
	h.init()
	parts := int(n)
	for len(h) > 0 {
		top := h.pop()
		i := top.at
		if nodes[i].rank != top.rank {
			continue
		}
		j := nodes[i].next
		k := nodes[j].next
		nodes[j].rank = noRank
		nodes[i].next = k
		if k >= 0 {
			nodes[k].prev = i
		}
		parts--
		for _, b := range [2]int32{i, nodes[i].prev} {
			if b < 0 {
				continue
			}
			nodes[b].rank = rankAt(b)
			if nodes[b].rank != noRank {
				h.push(pair{nodes[b].rank, b})
			}
		}
	}
	return parts
}

// pair is a candidate merge: the part at offset at with the next.
type pair struct {
	rank uint32
	at   int32
}

// pairHeap is a binary min-heap of pairs by rank, then offset.
type pairHeap []pair

func (h pairHeap) less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].at < h[b].at
}

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(c pair) {
	*h = append(*h, c)
	h.up(len(*h) - 1)
}

func (h *pairHeap) pop() pair {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return top
}

func (h pairHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (h pairHeap) down(i int) {
	for {
		child := 2*i + 1
		if child >= len(h) {
			return
		}
		if right := child + 1; right < len(h) && h.less(right, child) {
			child = right
		}
		if !h.less(child, i) {
			return
		}
		h[i], h[child] = h[child], h[i]
		i = child
	}
}
