package piece

import (
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Sentinel next steps. A movement may choose one only when its next lists it.
const (
	Complete     = "COMPLETE"      // the job succeeded; the summary is the answer
	Ask          = "ASK"           // the job waits for a person to answer a question
	Abort        = "ABORT"         // the job failed; the summary is the reason
	WaitSubtasks = "WAIT_SUBTASKS" // the job waits for child jobs
)

// Defaults applied when a piece leaves a budget out.
const (
	DefaultMaxMovements  = 10
	DefaultMaxIterations = 30
)

// IsSentinel reports whether step is one of Complete, Ask, Abort and
// WaitSubtasks rather than a movement name.
func IsSentinel(step string) bool {
	switch step {
	case Complete, Ask, Abort, WaitSubtasks:
		return true
	}
	return false
}

// locales are the locales a Text may be written in, the default first.
var locales = []string{"en", "ja"}

// Text is a piece's text in one or more locales, keyed by locale ("en",
// "ja"). A plain YAML string is stored under "en". The zero value is empty
// text.
type Text map[string]string

// For returns the text for locale, falling back to "en" and then to the
// alphabetically first locale present; "" when t is empty.
func (t Text) For(locale string) string {
	if s, ok := t[locale]; ok {
		return s
	}
	if s, ok := t["en"]; ok {
		return s
	}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	return t[keys[0]]
}

// Rules are what the operator's configuration allows a piece; Parse and
// Load refuse a piece that asks for more.
type Rules struct {
	// KnownTool reports whether a tool name exists; nil skips the check.
	KnownTool func(string) bool
	// NoNetwork, when not "", refuses every movement with network: true;
	// it says why, naming the configuration key that would grant it.
	NoNetwork string
}

// Piece is a validated state machine of movements. A *Piece returned by
// Parse or a Library is never modified afterwards and is safe for concurrent
// reads.
type Piece struct {
	Name            string
	Description     Text
	InitialMovement string // always a movement of Movements
	MaxMovements    int    // movement runs per job, >= 1
	Movements       []Movement
	Source          string // the file the piece was read from
}

// Movement returns the movement called name.
func (p *Piece) Movement(name string) (*Movement, bool) {
	for i := range p.Movements {
		if p.Movements[i].Name == name {
			return &p.Movements[i], true
		}
	}
	return nil, false
}

// Movement is one step of a piece: an agent loop with its own persona,
// instruction and tools, ended by a transition to one of Next.
type Movement struct {
	Name          string
	Persona       Text     // resolved text (file contents, not paths); may be empty
	Instruction   Text     // template, see Render
	Tools         []string // allowed tools, transition excluded
	Next          []string // allowed next steps: movement names and sentinels
	DefaultNext   string   // target of a forced transition; "" means Abort
	MaxIterations int      // LLM calls before a forced transition, >= 1
	Model         string   // model override; "" uses the configured model
	Network       bool     // Bash may reach the network
	Verify        bool     // the summary becomes feedback for the movement it sends work back to
	GitContext    bool     // git status/diff excerpt is given to the next movement
}

// Allows reports whether the movement may transition to step.
func (m *Movement) Allows(step string) bool {
	return slices.Contains(m.Next, step)
}

// ForcedNext is where a forced transition goes: DefaultNext, or Abort when
// the movement has none.
func (m *Movement) ForcedNext() string {
	if m.DefaultNext == "" {
		return Abort
	}
	return m.DefaultNext
}

// Vars fill the placeholders of an instruction.
type Vars struct {
	Task          string // {task}: the job's (enriched) instruction
	MovementCount int    // {movement_count}: movements run so far in the job
	MaxMovements  int    // {max_movements}: the piece's budget
	Iteration     int    // {iteration}: LLM call number in this movement
}

// Render returns the instruction for locale with {task}, {movement},
// {movement_count}, {max_movements} and {iteration} replaced. Any other
// {name} is left as written, and text substituted in is not expanded again,
// so a task that mentions "{iteration}" stays as the person wrote it.
func (m *Movement) Render(locale string, v Vars) string {
	r := strings.NewReplacer(
		"{task}", v.Task,
		"{movement}", m.Name,
		"{movement_count}", strconv.Itoa(v.MovementCount),
		"{max_movements}", strconv.Itoa(v.MaxMovements),
		"{iteration}", strconv.Itoa(v.Iteration),
	)
	return r.Replace(m.Instruction.For(locale))
}
