// Package engine runs a job through its piece: a state machine of
// movements, each an agent loop with an LLM and tools that ends with a
// transition tool call.
//
// The engine follows Baton's design note: the first user prompt of a job is
// an enriched instruction (date and time, the last five comments, the
// workspace listing, the request) and never the whole history; a movement's
// messages stay within it; only lessons, summaries, verify feedback,
// checklists and a git excerpt cross to the next movement; a context manager
// watches the window before every request and, past its thresholds, warns,
// asks for a wrap-up, and forces the transition. Beyond the note, with
// compaction on, it first masks old tool results and summarises the
// movement so that the ladder is reached only when that cannot help
// (compact.go).
//
// Engine implements worker.Engine. Its prompts live in prompts/ as
// templates, in English and Japanese, and are checked by golden tests; its
// shorter messages, the tools' words and the transition tool's are the
// locale's catalogue (core/catalog), which the engine hands to the tools.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/egress"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/policy"
	"github.com/baton-bot/baton/core/tokens"
	"github.com/baton-bot/baton/core/tools"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/core/workspace"
)

// Model sends one chat completion. *llm.Client implements it.
type Model interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// Store is what the engine reads and writes besides the job itself.
type Store interface {
	Task(ctx context.Context, id int64) (core.Task, error)
	EnsureTask(ctx context.Context, t core.Task) (core.Task, bool, error)
	RecentComments(ctx context.Context, taskID int64, n int) ([]core.Comment, error)
	Jobs(ctx context.Context, f core.JobFilter) ([]core.Job, error)
	// Approval and TakeCheckpoint resume a job parked for an approval
	// (core.ApprovalStore).
	Approval(ctx context.Context, jobID, waitSeq int64) (core.Approval, error)
	TakeCheckpoint(ctx context.Context, jobID, attempt int64) (string, error)
}

// Pieces finds pieces by name. *piece.Library implements it.
type Pieces interface {
	Lookup(name string) (*piece.Piece, bool)
}

// Toolbox finds tools by name.
type Toolbox interface {
	Lookup(name string) (tools.Tool, bool)
}

// Status is a running job's progress, for its status message.
type Status struct {
	JobID, TaskID int64
	Piece         string
	Movement      string
	MovementCount int // movements started, this one included
	MaxMovements  int
	Iteration     int
	Tokens        int64
	Level         string // the context level reached: "", warn, prompt, …
	Compactions   int    // times this movement's context was compacted
	Started       time.Time
	// PromptTokens and CachedTokens are this run's prompt tokens as the
	// provider reported them, and the part it served from its prompt
	// cache (prompt_tokens_details.cached_tokens).
	PromptTokens, CachedTokens int64
}

// Observer is told a running job's progress, at every movement start and
// after every model reply. It must return quickly.
type Observer interface {
	Observe(ctx context.Context, s Status)
}

// Notifier is an Observer that can post a notice in a running job's
// thread: something the people there should act on, such as a model
// server that cuts Baton's prompts. The engine finds it by type assertion
// on Config.Observer; without one the notice is only a job event.
type Notifier interface {
	Notice(ctx context.Context, taskID int64, text string) error
}

// StepKind is what a running job has just begun.
type StepKind string

const (
	// StepMovement: a movement begins (or resumes after an approval).
	StepMovement StepKind = "movement"
	// StepThinking: a request to the model, until its reply.
	StepThinking StepKind = "thinking"
	// StepTool: a tool call runs, until its result.
	StepTool StepKind = "tool"
	// StepDone: the run is over: the job finished, failed, waits for a
	// person or its subtasks, or was stopped. It is the last step of a
	// run that told any.
	StepDone StepKind = "done"
)

// Step is a step a running job begins, for a live view of the job (the
// console's spinner and its tool lines). Each step ends when the next one
// of the same job begins.
type Step struct {
	JobID, TaskID int64
	Kind          StepKind
	Piece         string
	Movement      string
	// MovementCount is the movements started, this one included; at
	// StepDone, the movements run to their end.
	MovementCount int
	// Tool and Subject (StepTool): the tool called and what the call is
	// about — the command for Bash, the path for Read, Write and Edit,
	// the JSON arguments otherwise (policy.Subject).
	Tool, Subject string
	At            time.Time
}

// Stepper is an Observer that is also told each step of a running job as
// it begins; the engine finds it by type assertion on Config.Observer.
// Steps of one job come in order, from the goroutine running it; Step
// must return quickly.
type Stepper interface {
	Step(ctx context.Context, s Step)
}

// Meter records the engine's measurements (Prometheus in production).
// Implementations are safe for concurrent use and return quickly.
type Meter interface {
	// LLMCall is one completion: its model, how long it took, the usage
	// it reported, and its error (nil on success).
	LLMCall(model string, took time.Duration, u llm.Usage, err error)
	// ToolCall is one tool run.
	ToolCall(tool string, took time.Duration, failed bool)
	// ContextLevel is a rung of the context ladder reached in a movement.
	ContextLevel(level string)
	// Movement is one movement run to its end.
	Movement(piece, movement string, took time.Duration)
	// TokenEstimate compares the offline tokenizer's count of a request
	// with the prompt tokens the provider reported for it; factor is the
	// model's correction factor learned so far.
	TokenEstimate(model string, estimated, reported int, factor float64)
}

// TextCallMeter is a Meter that also counts tool calls the model wrote as
// text (llm.Response.TextCalls and its kin); the engine finds it by type
// assertion on Config.Meter. outcome is "recovered" (read as calls),
// "repaired" (arguments repaired) or "unreadable" (the model was told the
// format).
type TextCallMeter interface {
	TextCalls(model, outcome string, n int)
}

// Levels are the context manager's thresholds, as fractions of the window.
type Levels struct {
	Warn      float64 // a job event (0.70)
	Prompt    float64 // a message asking to wrap up (0.85)
	Force     float64 // the movement is forced to default_next (0.95)
	Exhausted float64 // internal flag (0.99)
}

// Compaction configures what keeps a movement going when its context
// fills up (beyond the design note): masking old tool results and
// summarising the movement so far. The zero value is off, which gives the
// note's ladder exactly.
type Compaction struct {
	Enabled bool
	// Mask is the fraction of the window from which tool results older
	// than the last KeepResults are replaced by a stub (0.60).
	Mask float64
	// Compact is the fraction at which the movement is summarised and
	// continued from the summary (0.80).
	Compact float64
	// Target is the fraction a compaction must get under; above it the
	// wrap-up prompt follows at once (0.50).
	Target float64
	// MaxPerMovement caps compactions in one movement (2).
	MaxPerMovement int
	// KeepResults is how many of the latest tool results masking leaves
	// whole, and how many masking waits for before it masks again (5).
	KeepResults int
	// KeepPairs is how many of the latest tool calls, with their results,
	// compaction keeps whole (3).
	KeepPairs int
}

func (c *Compaction) setDefaults() {
	orDefault(&c.Mask, 0.60)
	orDefault(&c.Compact, 0.80)
	orDefault(&c.Target, 0.50)
	orDefault(&c.MaxPerMovement, 2)
	orDefault(&c.KeepResults, 5)
	orDefault(&c.KeepPairs, 3)
}

// orDefault sets *p to v when it is not positive.
func orDefault[T int | float64](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}

// Gate decides whether a tool call may run: allow, ask a person (the job
// waits for an approval), or deny. Implementations are safe for concurrent
// use.
type Gate interface {
	Decide(ctx context.Context, q policy.Request) (policy.Decision, error)
}

// Externals opens, for each run of a job, the tools of servers outside
// Baton that the job may use (the operator's MCP servers: core/mcp). The
// engine closes what it opened when the run ends, whether the job
// finished, failed, or parked for a person or its subtasks.
// Implementations are safe for concurrent use.
type Externals interface {
	Open(ctx context.Context, s ExternalScope) ExternalTools
}

// ExternalScope is the run external tools are opened for.
type ExternalScope struct {
	JobID, TaskID int64
	// Channel is the platform-qualified channel its calls are judged in
	// (a subtask's parent's); Piece the job's piece.
	Channel, Piece string
	// Dir is the task's workspace.
	Dir string
	// Event records a job event in the movement running.
	Event func(kind, detail string)
	// Ask puts a server's question to the people of the task's thread
	// and waits for the first reply (ok false: nobody could be asked, or
	// nobody answered within the approvals timeout).
	Ask func(ctx context.Context, server, question string) (answer string, ok bool, err error)
}

// Questioner is an Observer that can put a question in a running job's
// thread (an MCP server's elicitation, asked in the middle of a call);
// the engine finds it by type assertion on Config.Observer. The reply
// arrives as a comment of the task, as any message in the thread does.
type Questioner interface {
	Question(ctx context.Context, taskID int64, text string) error
}

// ExternalTools are a run's external tools. Offer returns those to offer
// in every movement (it may reach the servers the first time, within their
// own timeouts); Lookup finds any the run may call by the model's name for
// it, offered or loaded later (tools.Result.Load); Close ends what the run
// started. The tools' calls follow the tools.Tool contract, and the policy
// is asked about them with the kind they report (policy.Kinded).
type ExternalTools interface {
	Offer(ctx context.Context) []tools.Tool
	Lookup(name string) (tools.Tool, bool)
	Close() error
}

// Config configures an Engine. Zero fields take the defaults noted.
type Config struct {
	Locale              string         // "en" or "ja" ("en")
	Location            *time.Location // for the date-time block (time.Local)
	Model               string         // the model requests name unless a movement overrides it
	DefaultPiece        string         // piece of subtasks that name none ("chat")
	ContextWindow       int            // the model's tokens (128,000), as the ladder counts them
	MaxOutputTokens     int            // per completion, the model's tokens (4,096)
	MaxTokensPerJob     int64          // prompt + completion tokens; 0: unlimited
	Levels              Levels
	Compaction          Compaction
	ToolResultMaxTokens int   // ceiling of one tool result, the model's tokens (60,000)
	ReminderAfter       int   // text-only replies before a reminder (1)
	MovementLogBytes    int64 // cap of each movement's log under logs/ (2 MiB)
	WorkspaceRoot       string
	// MaxWorkspaceBytes caps each workspace's size around the tool calls
	// that write (see workspace.Quota); 0: no cap.
	MaxWorkspaceBytes int64
	// Floor is data_dir's free-space floor, shared by every job; nil: none.
	Floor *workspace.Floor
	// Sandbox runs git for the git_context excerpt; without a working one
	// (nil, mode none, or a failed probe) the excerpt is a note saying so.
	Sandbox  Sandbox
	Observer Observer // optional
	Meter    Meter    // optional
	// Gate decides on each tool call before it runs (the approvals
	// policy, policy.Policy); nil allows every call.
	Gate Gate
	// Externals adds the tools of the operator's MCP servers to every
	// movement of a job; nil: none.
	Externals Externals
	// ApprovalTimeout is how long an approval waits for a decision before
	// it is denied (1h).
	ApprovalTimeout time.Duration
	Now             func() time.Time
	Logger          *slog.Logger
	// Tracer traces movements, model requests and tool calls as children
	// of the attempt's span (see core.Tracer); nil: no tracing.
	Tracer core.Tracer

	// Egress is the egress proxy: each job run gets a session of it, and
	// its Bash commands their way out through it (see egress.go); nil:
	// commands have no network unless a movement grants it.
	Egress *egress.Proxy
}

func (c *Config) setDefaults() {
	if c.Locale == "" {
		c.Locale = "en"
	}
	if c.Location == nil {
		c.Location = time.Local
	}
	if c.DefaultPiece == "" {
		c.DefaultPiece = "chat"
	}
	if c.ContextWindow <= 0 {
		c.ContextWindow = 128000
	}
	if c.MaxOutputTokens <= 0 {
		c.MaxOutputTokens = 4096
	}
	if c.Levels == (Levels{}) {
		c.Levels = Levels{Warn: 0.70, Prompt: 0.85, Force: 0.95, Exhausted: 0.99}
	}
	c.Compaction.setDefaults()
	if c.ToolResultMaxTokens <= 0 {
		c.ToolResultMaxTokens = 60000
	}
	if c.ReminderAfter <= 0 {
		c.ReminderAfter = 1
	}
	if c.MovementLogBytes <= 0 {
		c.MovementLogBytes = 2 << 20
	}
	if c.ApprovalTimeout <= 0 {
		c.ApprovalTimeout = time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Engine runs jobs. It is safe for concurrent use by many workers.
type Engine struct {
	model   Model
	store   Store
	pieces  Pieces
	toolbox Toolbox
	tokens  tokens.Counter
	defs    *defCounts
	cfg     Config
	text    *texts
	corr    corrections // tokenizer correction per model
}

var _ worker.Engine = (*Engine)(nil)

// New returns an engine.
func New(model Model, store Store, pieces Pieces, toolbox Toolbox, counter tokens.Counter, cfg Config) (*Engine, error) {
	cfg.setDefaults()
	tx, err := loadTexts(cfg.Locale)
	if err != nil {
		return nil, err
	}
	return &Engine{model: model, store: store, pieces: pieces, toolbox: toolbox, tokens: counter, defs: newDefCounts(counter), cfg: cfg, text: tx}, nil
}

// Run runs the job of r from its current movement to an outcome: COMPLETE,
// ASK, ABORT or WAIT_SUBTASKS, or a failure with a plain reason (budget
// exhausted, the model unavailable). It returns an error only for faults
// worth retrying (the store unreachable, a workspace it cannot open).
func (e *Engine) Run(ctx context.Context, r *worker.Run) (core.Finish, error) {
	j := r.Job
	p, ok := e.pieces.Lookup(j.Piece)
	if !ok {
		return core.Finish{To: core.JobFailed, Error: fmt.Sprintf(e.text.msg("unknown_piece"), j.Piece)}, nil
	}
	run, err := e.newPieceRun(ctx, r, p)
	if err != nil {
		return core.Finish{}, err
	}
	defer run.ws.Close()
	if e.cfg.Externals != nil {
		run.ext = e.cfg.Externals.Open(ctx, ExternalScope{
			JobID: j.ID, TaskID: run.task.ID, Channel: run.channel(ctx), Piece: p.Name, Dir: run.ws.Root(),
			Event: func(kind, detail string) { _ = run.event(ctx, kind, run.currentMovement(), detail) },
			Ask:   run.askThread,
		})
		// Before the workspace closes: a stdio server runs in it.
		defer func() {
			if err := run.ext.Close(); err != nil {
				run.log.Warn("closing the run's MCP servers failed", "err", err)
			}
		}()
	}
	defer run.closeEgress()
	defer run.step(ctx, Step{Kind: StepDone})
	fin, err := run.run(ctx)
	fin.SeenCommentID = run.seen
	if err != nil {
		if c := context.Cause(ctx); c != nil {
			return core.Finish{}, c
		}
		var fe *failure
		if errors.As(err, &fe) {
			return core.Finish{To: core.JobFailed, Error: fe.reason, SeenCommentID: run.seen}, nil
		}
		return core.Finish{}, err
	}
	return fin, nil
}

// failure ends a job as failed with a reason people can read.
type failure struct{ reason string }

func (f *failure) Error() string { return f.reason }
