package engine

import (
	"sync"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/tokens"
)

// imageTokens is what one image part is assumed to cost when the provider
// reports no usage: a high-detail 1024×1024 image costs about 765 tokens
// with OpenAI's models; others are in the same range.
const imageTokens = 1000

// messageOverhead is the per-message framing (role, separators) that chat
// formats add around the content.
const messageOverhead = 4

// level is a rung of the context manager's ladder.
type level int

const (
	levelNone level = iota
	levelWarn
	levelPrompt
	levelForce
	levelExhausted
)

func (l level) String() string {
	return [...]string{"ok", "warn", "prompt", "force_transition", "exhausted"}[l]
}

// meter tracks how full a movement's context window is. Before every
// request it computes (P + C + N) / window, where P and C are the last
// response's prompt and completion tokens and N the tokens of what was
// appended since (negative when masking removed more than was added),
// counted with the tokenizer and scaled by the model's correction factor;
// when the provider reports no usage, the whole request is counted. Each
// message is counted once, when it is appended, so a turn costs the
// tokenizer only its new content.
type meter struct {
	window  int
	counter tokens.Counter
	corr    *correction // the model's tokenizer correction; nil: none
	factor  float64     // corr's factor when the movement last heard from the model
	sent    int         // the tokenizer's count of the last request

	counts    []int // tokens of each message, parallel to the messages
	total     int   // sum of counts
	toolDefs  int   // tokens of the tool definitions
	reported  bool  // the last response carried usage
	lastP     int   // its prompt tokens
	lastC     int   // its completion tokens
	sinceLast int   // tokens appended after it
	fired     [levelExhausted + 1]bool
}

// newMeter returns the meter of a movement whose tool definitions take
// toolDefs tokens.
func newMeter(window int, counter tokens.Counter, toolDefs int) *meter {
	return &meter{window: window, counter: counter, toolDefs: toolDefs, factor: 1}
}

// maxDefCounts bounds the tool definitions whose counts are remembered.
const maxDefCounts = 1024

// defCounts remembers the tokens of each tool definition: the same
// definitions go with every movement of every job, and their JSON schemas
// are long pieces that the tokenizer's own memo does not keep. Safe for
// concurrent use.
type defCounts struct {
	counter tokens.Counter

	mu     sync.Mutex
	counts map[string]int // guarded by mu; keyed on name, description and parameters
}

func newDefCounts(counter tokens.Counter) *defCounts {
	return &defCounts{counter: counter, counts: map[string]int{}}
}

// count returns the tokens of defs.
func (c *defCounts) count(defs []llm.ToolDef) int {
	n := 0
	for _, d := range defs {
		key := d.Name + "\x00" + d.Description + "\x00" + string(d.Parameters)
		c.mu.Lock()
		k, ok := c.counts[key]
		c.mu.Unlock()
		if !ok {
			k = c.counter.Count(d.Name) + c.counter.Count(d.Description) + c.counter.Count(string(d.Parameters))
			c.mu.Lock()
			if len(c.counts) >= maxDefCounts {
				clear(c.counts)
			}
			c.counts[key] = k
			c.mu.Unlock()
		}
		n += k
	}
	return n
}

// count returns the tokens of one message.
func (m *meter) count(msg llm.Message) int {
	n := messageOverhead + m.counter.Count(msg.Content)
	for _, p := range msg.Parts {
		if p.Type == llm.PartImage {
			n += imageTokens
		} else {
			n += m.counter.Count(p.Text)
		}
	}
	for _, c := range msg.ToolCalls {
		n += m.counter.Count(c.Name) + m.counter.Count(c.Arguments)
	}
	return n
}

// appended records a message added to the conversation.
func (m *meter) appended(msg llm.Message) {
	n := m.count(msg)
	m.counts = append(m.counts, n)
	m.total += n
	m.sinceLast += n
}

// replaced records that message i was replaced by msg (a masked tool
// result): the difference counts as appended.
func (m *meter) replaced(i int, msg llm.Message) {
	n := m.count(msg)
	d := n - m.counts[i]
	m.counts[i] = n
	m.total += d
	m.sinceLast += d
}

// addDefs records n more tokens of tool definitions, sent from the next
// request on.
func (m *meter) addDefs(n int) {
	m.toolDefs += n
	m.sinceLast += n
}

// sending records the tokenizer's count of the request about to be sent,
// for comparison with the prompt tokens the response reports.
func (m *meter) sending() { m.sent = m.total + m.toolDefs }

// Truncation: a server that reports far fewer prompt tokens than the
// tokenizer counted has cut the prompt (Ollama does so silently at its
// num_ctx). Tokenizers differ by tens of percent, so "far" is under
// 1/truncRatio of the count, and only for requests of truncMinTokens and
// more.
const (
	truncRatio     = 2
	truncMinTokens = 1024
)

// responded records the usage of a response; the assistant message itself
// must be recorded with appended first. It teaches the correction the
// difference between the reported prompt and the tokenizer's count.
// truncated reports a prompt the server counted at far less than was
// sent: the report is then not believed (the next request is counted
// with the tokenizer) and teaches the correction nothing.
func (m *meter) responded(u llm.Usage) (truncated bool) {
	if !u.Reported {
		m.reported = false
		return false
	}
	if u.PromptTokens > 0 && m.sent >= truncMinTokens && u.PromptTokens*truncRatio < m.scale(m.sent) {
		m.reported = false
		return true
	}
	m.reported = true
	m.lastP, m.lastC, m.sinceLast = u.PromptTokens, u.CompletionTokens, 0
	if m.corr != nil {
		m.factor = m.corr.learn(m.sent, u.PromptTokens)
	}
	return false
}

// used returns the tokens the next request will hold, in the model's
// tokens: the provider's report, and the tokenizer's counts scaled by the
// correction. Everything the ladder compares is in these units.
func (m *meter) used() int {
	if m.reported {
		return m.lastP + m.lastC + m.scale(m.sinceLast)
	}
	return m.scale(m.total + m.toolDefs)
}

// scale turns a tokenizer count into the model's tokens.
func (m *meter) scale(n int) int { return int(float64(n) * m.factor) }

// restart sets the movement's messages to msgs after compaction replaced
// them; counts are their known counts, -1 for those to count. The levels
// already fired stay fired, and the next request is estimated with the
// tokenizer until a response reports usage.
func (m *meter) restart(msgs []llm.Message, counts []int) {
	m.counts, m.total, m.sinceLast, m.reported = m.counts[:0], 0, 0, false
	m.lastP, m.lastC = 0, 0
	for i, msg := range msgs {
		n := counts[i]
		if n < 0 {
			n = m.count(msg)
		}
		m.counts = append(m.counts, n)
		m.total += n
	}
}

// ratio returns used / window.
func (m *meter) ratio() float64 {
	return float64(m.used()) / float64(m.window)
}

// check returns the levels up to top newly reached, lowest first; each
// level fires at most once per movement.
func (m *meter) check(lv Levels, top level) []level {
	r := m.ratio()
	var out []level
	for _, x := range []struct {
		l level
		t float64
	}{{levelWarn, lv.Warn}, {levelPrompt, lv.Prompt}, {levelForce, lv.Force}, {levelExhausted, lv.Exhausted}} {
		if x.l <= top && r >= x.t && !m.fired[x.l] {
			m.fired[x.l] = true
			out = append(out, x.l)
		}
	}
	return out
}

// Bounds of a correction factor: tokenizers of current models differ from
// the offline one by tens of percent, not by multiples; a wild report (a
// provider counting something else) must not make every estimate absurd.
const (
	minFactor = 0.5
	maxFactor = 2.0
	// minSample is the smallest request whose count teaches the factor:
	// below it the fixed overheads dominate the ratio.
	minSample = 500
	// learnRate weighs each new observation in the moving average.
	learnRate = 0.2
)

// correction is a per-model factor between the offline tokenizer's counts
// and the prompt tokens the provider reports, learned as an exponentially
// weighted moving average over the engine's life. It is safe for
// concurrent use.
type correction struct {
	mu     sync.Mutex
	factor float64 // guarded by mu; 0 until the first observation
}

// learn records one request counted as estimated and reported as
// reported, and returns the factor to use from now on.
func (c *correction) learn(estimated, reported int) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if estimated >= minSample && reported > 0 {
		r := min(max(float64(reported)/float64(estimated), minFactor), maxFactor)
		if c.factor == 0 {
			c.factor = r
		} else {
			c.factor += learnRate * (r - c.factor)
		}
	}
	if c.factor == 0 {
		return 1
	}
	return c.factor
}

// current returns the factor (1 before any observation).
func (c *correction) current() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.factor == 0 {
		return 1
	}
	return c.factor
}

// corrections holds one correction per model.
type corrections struct {
	mu sync.Mutex
	m  map[string]*correction // guarded by mu
}

func (cs *corrections) forModel(model string) *correction {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m == nil {
		cs.m = map[string]*correction{}
	}
	c, ok := cs.m[model]
	if !ok {
		c = &correction{}
		cs.m[model] = c
	}
	return c
}
