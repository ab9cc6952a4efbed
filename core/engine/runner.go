package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/tools"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/core/workspace"
)

// lessonsLimit caps the lessons section (characters); the oldest lessons
// are dropped first.
const lessonsLimit = 2000

// handoverLimit caps the previous movement's summary given to the next one.
const handoverLimit = 2000

// carried is what crosses from one movement to the next, persisted with
// the job's progress (the jobs.lessons column) so that a redelivered job
// resumes with it.
type carried struct {
	Lessons  []lesson            `json:"lessons,omitempty"`
	Feedback map[string][]string `json:"feedback,omitempty"` // verify feedback by target movement
	Git      string              `json:"git,omitempty"`      // excerpt for the next movement
	Handover string              `json:"handover,omitempty"` // the previous movement's summary

	// Raises are what `continue` added to the budgets, for the rest of
	// the job (budget.go).
	Raises Limits `json:"raises,omitempty"`
	// Changes counts the calls that may have changed the workspace, and
	// Cycles the movements entered with nothing changed (guard.go).
	Changes int              `json:"changes,omitempty"`
	Cycles  map[string]cycle `json:"cycles,omitempty"`
	// Model, when set, is the model every movement of the job asks,
	// instead of the movement's or the engine's (a re-run with another
	// model; core.EventMovementState).
	Model string `json:"model,omitempty"`
}

type lesson struct {
	Movement string `json:"movement"`
	Next     string `json:"next_step"`
	Text     string `json:"lessons"`
}

// pieceRun is one attempt of a job through its piece.
type pieceRun struct {
	e     *Engine
	r     *worker.Run
	job   core.Job
	task  core.Task
	piece *piece.Piece
	ws    *workspace.Workspace
	quota *workspace.Quota // the workspace's size cap and data_dir's floor
	state carried
	log   *slog.Logger

	seen int64 // the newest comment the run has seen (first prompt or steering)

	homeChannel string // where its calls are judged (see channel); "" until asked

	ext ExternalTools // the run's MCP tools; nil: none
	// answered are comments that answered a server's question (askThread),
	// which steering does not hand the agent again; guarded by mu.
	answered map[int64]bool

	prepared bool // the workspace's input/ and output/ exist

	mu               sync.Mutex
	movement         string // guarded by mu: for status
	iteration        int
	level            level
	compactions      int // in the current movement
	promptTokens     int64
	completionTokens int64

	truncNoticed bool // guarded by mu: the thread was told of a truncated prompt
	// reportedPrompt and cachedPrompt are this run's prompt tokens as the
	// provider reported them and the part it served from its prompt cache.
	reportedPrompt, cachedPrompt int64

	egress *egressRun // guarded by mu: the egress proxy's session and decisions; nil until used

	// lastTokens and lastCost are the last model request's usage, what the
	// budgets expect the next to take; guarded by mu.
	lastTokens int64
	lastCost   float64

	begun time.Time // when the attempt began, for the max_duration guard
}

func (e *Engine) newPieceRun(ctx context.Context, r *worker.Run, p *piece.Piece) (*pieceRun, error) {
	task, err := e.store.Task(ctx, r.Job.TaskID)
	if err != nil {
		return nil, fmt.Errorf("task of job %d: %w", r.Job.ID, err)
	}
	// input/ and output/ are made before the first tool call (toolsReady).
	ws, err := workspace.OpenLazy(task.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace of task %d: %w", task.ID, err)
	}
	pr := &pieceRun{
		e: e, r: r, job: r.Job, task: task, piece: p, ws: ws,
		quota:        workspace.NewQuota(ws, e.cfg.MaxWorkspaceBytes, e.cfg.Floor),
		log:          core.TraceLogger(ctx, e.cfg.Tracer, e.cfg.Logger.With("task", task.ID, "job", r.Job.ID)),
		promptTokens: r.Job.PromptTokens, completionTokens: r.Job.CompletionTokens,
		begun: e.cfg.Now(),
	}
	if r.Job.Lessons != "" {
		if err := json.Unmarshal([]byte(r.Job.Lessons), &pr.state); err != nil {
			pr.log.Warn("carried lessons unreadable; starting without them", "err", err)
		}
	}
	return pr, nil
}

// run drives the movements from where the job stands to an outcome.
func (pr *pieceRun) run(ctx context.Context) (core.Finish, error) {
	e, j := pr.e, &pr.job
	name := j.Movement
	if j.ResumeMovement != "" {
		name = j.ResumeMovement
	}
	if _, ok := pr.piece.Movement(name); !ok {
		name = pr.piece.InitialMovement
	}
	resumedFromSubtasks := j.ResumeMovement != "" && j.WaitSeq > 0
	cp, decided, err := pr.checkpoint(ctx)
	if err != nil {
		return core.Finish{}, err
	}
	if cp != nil {
		name = cp.Movement
	}

	// Comments from now on are news to the agent (steering); the first
	// prompt holds the ones before.
	if last, err := e.store.RecentComments(ctx, pr.task.ID, 1); err == nil && len(last) > 0 {
		pr.seen = last[0].ID
	}
	enriched, err := e.enriched(ctx, pr.task, *j, pr.ws, noteLimits)
	if err != nil {
		return core.Finish{}, err
	}
	// Events recorded with the next save of the progress, in its
	// transaction: a movement's end with the next one's start, or with the
	// job's last save.
	var pending []core.JobEvent
	for {
		if j.MovementCount >= pr.piece.MaxMovements {
			pr.flush(ctx, pending)
			return core.Finish{}, &failure{reason: fmt.Sprintf(e.text.msg("budget_movements"), pr.piece.MaxMovements)}
		}
		mv, _ := pr.piece.Movement(name)
		if n, stop := pr.cycled(name); stop && cp == nil {
			// Entered again with nothing changed: ask before going round
			// once more; answered, the movement starts afresh.
			pr.state.Cycles[name] = cycle{Mark: pr.state.Cycles[name].Mark}
			pr.tripped(ctx, GuardCycles, name, fmt.Sprintf("entered %d times with no change in the workspace or the lessons", n))
			q := e.text.fill("guard_question_cycles", map[string]string{"movement": name, "n": strconv.Itoa(n)})
			if err := pr.save(ctx, name, pending...); err != nil {
				pr.flush(ctx, pending)
				return core.Finish{}, err
			}
			return core.Finish{To: core.JobWaitingHuman, Question: q, WaitKind: core.WaitGuard, ResumeMovement: name,
				ResultSummary: q, Comments: pr.botComment(q)}, nil
		}
		pr.mu.Lock()
		pr.movement, pr.iteration, pr.level, pr.compactions = name, 0, levelNone, 0
		pr.mu.Unlock()
		started := jobEvent("movement_started", name, fmt.Sprintf("%d/%d", j.MovementCount+1, pr.piece.MaxMovements))
		switch {
		case cp != nil && cp.Guard != nil:
			started = jobEvent("movement_resumed", name, fmt.Sprintf("%d/%d, after the %s guard was answered", j.MovementCount+1, pr.piece.MaxMovements, cp.Guard.Kind))
		case cp != nil && cp.Budget != nil:
			started = jobEvent("movement_resumed", name, fmt.Sprintf("%d/%d, %s", j.MovementCount+1, pr.piece.MaxMovements, budgetNote(cp.Budget)))
		case cp != nil:
			started = jobEvent("movement_resumed", name, fmt.Sprintf("%d/%d, after %s's call was %s", j.MovementCount+1, pr.piece.MaxMovements, decided.Tool, decided.State))
		}
		// The state the movement starts with, for a re-run from it.
		state, _ := json.Marshal(pr.state)
		if err := pr.save(ctx, name, append(pending, started, jobEvent(core.EventMovementState, name, string(state)))...); err != nil {
			pr.flush(ctx, pending)
			return core.Finish{}, err
		}
		pending = nil
		pr.observe(ctx)
		pr.step(ctx, Step{Kind: StepMovement})
		pr.progress(ctx, core.ProgressEvent{Kind: core.ProgressMovementStarted, Movement: name})

		// The movement's first prompts; shrink > 0 rebuilds them with the
		// enriched instruction's caps halved that many times, for a first
		// request that does not fit the window.
		prompts := func(shrink int) (string, string, error) {
			text := enriched
			if shrink > 0 {
				var err error
				if text, err = e.enriched(ctx, pr.task, *j, pr.ws, noteLimits.shrunk(shrink)); err != nil {
					return "", "", err
				}
			}
			return pr.prompts(ctx, mv, text, resumedFromSubtasks)
		}

		begun := time.Now()
		var out outcome
		if cp != nil {
			out, err = pr.resumeMovement(ctx, mv, *cp, decided)
			cp = nil
		} else {
			out, err = pr.runMovement(ctx, mv, prompts)
		}
		if err != nil {
			return core.Finish{}, err
		}
		if p := out.park; p != nil && p.waitKind != "" {
			// The engine asks the thread (a budget, a guard): the
			// movement resumes from p.checkpoint once answered.
			if err := pr.save(ctx, name); err != nil {
				return core.Finish{}, err
			}
			return core.Finish{To: core.JobWaitingHuman, Question: p.question, WaitKind: p.waitKind, ResumeMovement: name,
				Checkpoint: p.checkpoint, ResultSummary: p.question, Comments: pr.botComment(p.question)}, nil
		}
		if p := out.park; p != nil {
			// The movement stops at a call that waits for a person; it
			// is not over, and resumes from p.checkpoint.
			a := p.approval
			pr.progress(ctx, core.ProgressEvent{Kind: core.ProgressApproval, Movement: name, Title: ToolTitle(a.Tool, a.Subject)})
			return core.Finish{To: core.JobWaitingApproval, ResumeMovement: name, Approval: &a, Checkpoint: p.checkpoint,
				ResultSummary: a.Tool + ": " + clipRunes(a.Subject, 200)}, nil
		}
		resumedFromSubtasks = false
		pr.state.Git = ""
		if e.cfg.Meter != nil {
			e.cfg.Meter.Movement(pr.piece.Name, name, time.Since(begun))
		}
		j.MovementCount++
		detail := out.Next
		if out.Forced != "" {
			detail += " (" + out.Forced + ")"
		}
		pending = append(pending, jobEvent("movement_finished", name, detail))
		pr.progress(ctx, core.ProgressEvent{Kind: core.ProgressMovementEnded, Movement: name})

		pr.recordLesson(name, out)
		pr.state.Handover = ""
		if !piece.IsSentinel(out.Next) {
			if mv.Verify {
				if pr.state.Feedback == nil {
					pr.state.Feedback = map[string][]string{}
				}
				pr.state.Feedback[out.Next] = append(pr.state.Feedback[out.Next], out.Summary)
			} else {
				pr.state.Handover = pr.e.text.fill("handover", map[string]string{"movement": name, "summary": clipRunes(strings.TrimSpace(out.Summary), handoverLimit)})
			}
		}
		if mv.GitContext {
			pr.state.Git = gitExcerpt(ctx, pr.e.cfg.Sandbox, pr.ws.Root(), pr.e.text.msg("git_unavailable"))
		}

		switch out.Next {
		case piece.Complete:
			if err := pr.save(ctx, name, pending...); err != nil {
				pr.flush(ctx, pending)
				return core.Finish{}, err
			}
			return core.Finish{To: core.JobSucceeded, ResultSummary: out.Summary, Comments: pr.botComment(out.Summary)}, nil
		case piece.Ask:
			if err := pr.save(ctx, name, pending...); err != nil {
				pr.flush(ctx, pending)
				return core.Finish{}, err
			}
			return core.Finish{To: core.JobWaitingHuman, Question: out.Question, ResumeMovement: name, ResultSummary: out.Summary, Comments: pr.botComment(out.Question)}, nil
		case piece.Abort:
			if err := pr.save(ctx, name, pending...); err != nil {
				pr.flush(ctx, pending)
				return core.Finish{}, err
			}
			return core.Finish{To: core.JobFailed, Error: out.Summary, ResultSummary: out.Summary}, nil
		case piece.WaitSubtasks:
			if err := pr.save(ctx, name, pending...); err != nil {
				pr.flush(ctx, pending)
				return core.Finish{}, err
			}
			children, err := pr.children(ctx, out.Subtasks)
			if err != nil {
				return core.Finish{}, err
			}
			return core.Finish{To: core.JobWaitingSubtasks, ResumeMovement: name, ResultSummary: out.Summary, Children: children}, nil
		default:
			name = out.Next
		}
	}
}

// checkpoint takes what the job's movement left when it parked for an
// approval, and the decision taken on it; nil when the job did not park
// for one, or the checkpoint was taken by an attempt that did not finish
// (the movement then starts afresh).
func (pr *pieceRun) checkpoint(ctx context.Context) (*checkpoint, core.Approval, error) {
	j := pr.job
	if j.ResumeMovement == "" || j.WaitSeq == 0 {
		return nil, core.Approval{}, nil
	}
	if j.WaitKind != "" {
		return pr.askedCheckpoint(ctx)
	}
	a, err := pr.e.store.Approval(ctx, j.ID, j.WaitSeq)
	if errors.Is(err, core.ErrNotFound) {
		return nil, core.Approval{}, nil // an ASK or subtasks wait
	}
	if err != nil {
		return nil, core.Approval{}, fmt.Errorf("approval of job %d: %w", j.ID, err)
	}
	if a.State == core.ApprovalPending {
		// Requeued without a decision (a repair from the store): the
		// movement starts afresh, and its call is asked again.
		pr.log.Warn("resumed with its approval undecided; the movement starts afresh", "approval", a.Key())
		return nil, core.Approval{}, nil
	}
	data, err := pr.e.store.TakeCheckpoint(ctx, j.ID, j.Attempt)
	if err != nil {
		return nil, core.Approval{}, err
	}
	if data == "" {
		pr.log.Info("the approval's checkpoint was taken by an earlier attempt; the movement starts afresh", "approval", a.Key())
		return nil, core.Approval{}, nil
	}
	var cp checkpoint
	if err := json.Unmarshal([]byte(data), &cp); err != nil {
		pr.log.Warn("the approval's checkpoint is unreadable; the movement starts afresh", "approval", a.Key(), "err", err)
		return nil, core.Approval{}, nil
	}
	if _, ok := pr.piece.Movement(cp.Movement); !ok {
		pr.log.Warn("the approval's movement is no longer in the piece; the movement starts afresh", "movement", cp.Movement)
		return nil, core.Approval{}, nil
	}
	return &cp, a, nil
}

// botComment is what the bot says in the thread, stored as a comment with
// the job's outcome so that the next job's last comments hold it.
func (pr *pieceRun) botComment(text string) []core.Comment {
	return []core.Comment{{TaskID: pr.task.ID, Role: core.RoleBot, AuthorName: "Baton", Text: text, CreatedAt: pr.e.cfg.Now()}}
}

// prompts renders a movement's system and first user prompt.
func (pr *pieceRun) prompts(ctx context.Context, mv *piece.Movement, enriched string, withSubtasks bool) (string, string, error) {
	e := pr.e
	names := make([]string, len(pr.piece.Movements))
	for i, m := range pr.piece.Movements {
		names[i] = m.Name
	}
	next := mv.Next
	if pr.job.ParentJobID != 0 {
		next = without(next, piece.WaitSubtasks)
	}
	system, err := execute(e.text.system, map[string]any{
		"Persona": strings.TrimSpace(mv.Persona.For(e.cfg.Locale)), "Piece": pr.piece.Name,
		"Description": pr.piece.Description.For(e.cfg.Locale), "Movements": names, "Movement": mv.Name,
		"Next": next, "CanAsk": contains(next, piece.Ask), "CanSplit": contains(next, piece.WaitSubtasks),
	})
	if err != nil {
		return "", "", err
	}
	checklists, err := tools.LoadChecklists(pr.ws, pr.e.text.cat)
	if err != nil {
		pr.log.Warn("checklists unreadable", "err", err)
	}
	var subtasks string
	if withSubtasks {
		if subtasks, err = pr.subtaskResults(ctx); err != nil {
			return "", "", err
		}
	}
	user, err := execute(e.text.user, map[string]any{
		"Enriched":   enriched,
		"Lessons":    pr.lessonsSection(),
		"Feedback":   pr.feedbackSection(mv.Name),
		"Subtasks":   subtasks,
		"Checklists": strings.TrimSpace(checklists),
		"Git":        pr.state.Git,
		"Handover":   pr.state.Handover,
		"Movement":   mv.Name,
		"Instruction": strings.TrimSpace(mv.Render(e.cfg.Locale, piece.Vars{
			Task: pr.job.Instruction, MovementCount: pr.job.MovementCount, MaxMovements: pr.piece.MaxMovements, Iteration: 1,
		})),
	})
	return system, user, err
}

func without(list []string, s string) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

// recordLesson keeps a movement's lessons for the following movements and
// appends them to logs/lessons.jsonl. A COMPLETE without lessons records its
// summary as the lesson.
func (pr *pieceRun) recordLesson(movement string, out outcome) {
	text := strings.TrimSpace(out.Lessons)
	if text == "" && out.Next == piece.Complete {
		text = strings.TrimSpace(out.Summary)
	}
	if text == "" {
		return
	}
	pr.state.Lessons = append(pr.state.Lessons, lesson{Movement: movement, Next: out.Next, Text: text})
	line, _ := json.Marshal(map[string]any{
		"at": pr.e.cfg.Now().UTC().Format(time.RFC3339), "job": pr.job.ID, "movement": movement, "next_step": out.Next, "lessons": text,
	})
	f, err := pr.ws.OpenLog("logs/lessons.jsonl", os.O_APPEND|os.O_CREATE|os.O_WRONLY)
	if err != nil {
		pr.log.Warn("writing lessons.jsonl failed", "err", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		pr.log.Warn("writing lessons.jsonl failed", "err", err)
	}
}

// lessonsSection renders the carried lessons, newest kept, within
// lessonsLimit characters.
func (pr *pieceRun) lessonsSection() string {
	var lines []string
	size := 0
	for i := len(pr.state.Lessons) - 1; i >= 0; i-- {
		l := pr.state.Lessons[i]
		line := pr.e.text.fill("lesson_line", map[string]string{"movement": l.Movement, "next": l.Next, "text": l.Text})
		n := len([]rune(line)) + 1
		if size+n > lessonsLimit {
			if len(lines) == 0 { // one lesson alone over the cap keeps its head
				lines = append(lines, prefixRunes(line, lessonsLimit-1)+"…")
			}
			break
		}
		size += n
		lines = append(lines, line)
	}
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return strings.Join(lines, "\n")
}

// feedbackSection renders the verify feedback accumulated for movement.
func (pr *pieceRun) feedbackSection(movement string) string {
	rounds := pr.state.Feedback[movement]
	if len(rounds) == 0 {
		return ""
	}
	var b strings.Builder
	for i, f := range rounds {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(pr.e.text.fill("feedback_round", map[string]string{"n": strconv.Itoa(i + 1)}))
		b.WriteString("\n")
		b.WriteString(strings.TrimSpace(f))
	}
	return b.String()
}

// save persists the job's progress: the movement running or last run, the
// movements counted, the carried state and the tokens used, with events in
// the same transaction.
func (pr *pieceRun) save(ctx context.Context, movement string, events ...core.JobEvent) error {
	state, _ := json.Marshal(pr.state)
	pr.mu.Lock()
	p := core.Progress{
		Movement: movement, MovementCount: pr.job.MovementCount, Iteration: pr.iteration, Lessons: string(state),
		PromptTokens: pr.promptTokens, CompletionTokens: pr.completionTokens, Events: events,
	}
	pr.mu.Unlock()
	return pr.r.Save(ctx, p)
}

// currentMovement is the movement running, for events told from outside
// its loop.
func (pr *pieceRun) currentMovement() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.movement
}

// observe reports the run's progress to the observer.
func (pr *pieceRun) observe(ctx context.Context) {
	o := pr.e.cfg.Observer
	if o == nil {
		return
	}
	pr.mu.Lock()
	st := Status{
		JobID: pr.job.ID, TaskID: pr.task.ID, Piece: pr.piece.Name, Movement: pr.movement,
		MovementCount: pr.job.MovementCount + 1, MaxMovements: pr.piece.MaxMovements, Iteration: pr.iteration,
		Tokens: pr.promptTokens + pr.completionTokens, Started: pr.job.StartedAt, Compactions: pr.compactions,
		PromptTokens: pr.reportedPrompt, CachedTokens: pr.cachedPrompt,
	}
	if pr.level != levelNone {
		st.Level = pr.level.String()
	}
	pr.mu.Unlock()
	o.Observe(ctx, st)
}

// step tells the observer, when it is a Stepper, that s begins; the job,
// piece, movement and time are filled in.
func (pr *pieceRun) step(ctx context.Context, s Step) {
	st, ok := pr.e.cfg.Observer.(Stepper)
	if !ok {
		return
	}
	pr.mu.Lock()
	s.JobID, s.TaskID, s.Piece, s.Movement = pr.job.ID, pr.task.ID, pr.piece.Name, pr.movement
	s.MovementCount = pr.job.MovementCount
	if s.Kind != StepDone {
		s.MovementCount++
	}
	pr.mu.Unlock()
	s.At = pr.e.cfg.Now()
	st.Step(ctx, s)
}

// addUsage accounts one response's tokens and enforces the job's budget.
// estimate stands for the prompt tokens when the response reported none.
func (pr *pieceRun) addUsage(ctx context.Context, movement, model string, u llm.Usage, estimate int) error {
	prompt, completion := int64(u.PromptTokens), int64(u.CompletionTokens)
	if !u.Reported {
		prompt, completion = int64(estimate), 0
	}
	pr.mu.Lock()
	pr.promptTokens += prompt
	pr.completionTokens += completion
	if u.Reported {
		pr.reportedPrompt += prompt
		pr.cachedPrompt += int64(u.CachedTokens)
	}
	share := cachedShare(pr.cachedPrompt, pr.reportedPrompt)
	pr.mu.Unlock()
	cached := min(int64(u.CachedTokens), prompt)
	pr.record(ctx, model, prompt, cached, completion) // its cost is in the usage row
	_ = pr.event(ctx, "usage", movement, fmt.Sprintf("prompt=%d completion=%d cached=%d reported=%t cached_share=%s", prompt, completion, u.CachedTokens, u.Reported, share))
	pr.observe(ctx)
	return nil
}

// jobEvent is an event of the job, now.
func jobEvent(kind, movement, detail string) core.JobEvent {
	return core.JobEvent{At: time.Now(), Kind: kind, Movement: movement, Detail: detail}
}

// flush records events that found no save to go with, logging rather
// than failing on error.
func (pr *pieceRun) flush(ctx context.Context, events []core.JobEvent) {
	for _, e := range events {
		_ = pr.event(ctx, e.Kind, e.Movement, e.Detail)
	}
}

// toolsReady makes sure the workspace has its input/ and output/ folders,
// which tools (and the agent's shell commands) take for granted.
func (pr *pieceRun) toolsReady() error {
	if pr.prepared {
		return nil
	}
	if err := pr.ws.Prepare(); err != nil {
		return err
	}
	pr.prepared = true
	return nil
}

// event records a job event, logging rather than failing on error.
func (pr *pieceRun) event(ctx context.Context, kind, movement, detail string) error {
	err := pr.r.Event(context.WithoutCancel(ctx), kind, movement, detail)
	if err != nil {
		pr.log.Warn("recording a job event failed", "kind", kind, "err", err)
	}
	return err
}

// steeringRunes caps a message handed to a running agent.
const steeringRunes = 2000

// steering returns the people's messages that arrived in the thread since
// the run last looked, to hand the agent before its next request.
func (pr *pieceRun) steering(ctx context.Context) []llm.Message {
	recent, err := pr.e.store.RecentComments(ctx, pr.task.ID, 10)
	if err != nil {
		pr.log.Warn("reading new comments failed", "err", err)
		return nil
	}
	var out []llm.Message
	for _, c := range recent {
		if c.ID <= pr.seen {
			continue
		}
		pr.seen = c.ID
		pr.mu.Lock()
		answer := pr.answered[c.ID]
		pr.mu.Unlock()
		if answer {
			continue
		}
		text := strings.TrimSpace(c.Text)
		if c.Role != core.RoleUser || strings.HasPrefix(text, "!") {
			continue
		}
		name := c.AuthorName
		if name == "" {
			name = c.AuthorID
		}
		out = append(out, llm.Message{Role: llm.RoleUser, Content: pr.e.text.fill("new_message", map[string]string{"name": name, "text": pr.e.cut(text, steeringRunes)})})
		_ = pr.event(ctx, "steered", pr.movement, fmt.Sprintf("comment %d from %s", c.ID, name))
	}
	return out
}

// children creates the child tasks of WAIT_SUBTASKS, each with a copy of
// the parent's input/, and returns their jobs for the store to create with
// the parent's transition. Creating them again (a retried attempt) finds the
// same tasks.
func (pr *pieceRun) children(ctx context.Context, subs []subtask) ([]core.Job, error) {
	jobs := make([]core.Job, 0, len(subs))
	for i, s := range subs {
		t, _, err := pr.e.store.EnsureTask(ctx, core.Task{
			ParentTaskID: pr.task.ID,
			Thread: core.ThreadRef{Platform: core.PlatformSubtask, Channel: strconv.FormatInt(pr.task.ID, 10),
				Thread: fmt.Sprintf("job%d.wait%d.%d", pr.job.ID, pr.job.WaitSeq+1, i+1)},
			OwnerUser: pr.task.OwnerUser,
			Title:     s.Title,
		})
		if err != nil {
			return nil, fmt.Errorf("create subtask %d: %w", i+1, err)
		}
		cws, err := workspace.Open(t.Workspace)
		if err != nil {
			return nil, fmt.Errorf("workspace of subtask %d: %w", i+1, err)
		}
		_, err = copyFiles(pr.ws, workspace.Input, cws, workspace.Input)
		cws.Close()
		if err != nil {
			pr.log.Warn("copying input/ to a subtask left files out", "subtask", t.ID, "err", err)
		}
		p := s.Piece
		if p == "" {
			p = pr.e.cfg.DefaultPiece
		}
		jobs = append(jobs, core.Job{TaskID: t.ID, ParentJobID: pr.job.ID, Piece: p, Instruction: s.Instruction})
	}
	return jobs, nil
}

// subtaskResults renders each child job's state, summary and output files,
// copying the files into the parent's input/subtasks/<task>/ so that the
// parent's tools can read them.
func (pr *pieceRun) subtaskResults(ctx context.Context) (string, error) {
	kids, err := pr.e.store.Jobs(ctx, core.JobFilter{ParentJobID: pr.job.ID})
	if err != nil {
		return "", fmt.Errorf("subtasks of job %d: %w", pr.job.ID, err)
	}
	var lines []string
	for i := len(kids) - 1; i >= 0; i-- { // oldest first
		k := kids[i]
		t, err := pr.e.store.Task(ctx, k.TaskID)
		if err != nil {
			return "", err
		}
		summary := k.ResultSummary
		if k.State != core.JobSucceeded && k.Error != "" {
			summary = k.Error
		}
		if summary != "" {
			summary = ": " + clipRunes(strings.TrimSpace(summary), 1500)
		}
		var files string
		dst := path.Join(workspace.Input, "subtasks", strconv.FormatInt(t.ID, 10))
		if n := pr.subtaskFiles(t, dst); n > 0 {
			files = " (files: " + dst + "/)"
		}
		lines = append(lines, pr.e.text.fill("subtask_line", map[string]string{
			"title": t.Title, "state": string(k.State), "summary": summary, "files": files,
		}))
	}
	return strings.Join(lines, "\n"), nil
}

// subtaskFiles copies the child task t's output/ into the parent's folder
// dst and returns how many files it copied.
func (pr *pieceRun) subtaskFiles(t core.Task, dst string) int {
	cws, err := workspace.OpenExisting(t.Workspace)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		pr.log.Warn("opening a subtask's workspace failed", "subtask", t.ID, "err", err)
		return 0
	}
	defer cws.Close()
	n, err := copyFiles(cws, workspace.Output, pr.ws, dst)
	if err != nil {
		pr.log.Warn("copying a subtask's output/ left files out", "subtask", t.ID, "err", err)
	}
	return n
}

// copyFiles copies the regular files under src's folder from into dst's
// folder to, keeping their paths below it, and returns how many it copied.
// A missing folder copies nothing. Symlinks and special files are skipped;
// a file that cannot be copied (a symlink in dst that leads out, say) is
// left out and reported in the error while the others are copied. Every
// read and write stays inside its workspace.
func copyFiles(src *workspace.Workspace, from string, dst *workspace.Workspace, to string) (int, error) {
	n, root := 0, ""
	var errs []error
	err := src.Walk(from, func(p string, d fs.DirEntry, err error) error {
		if root == "" {
			root = p
		}
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			errs = append(errs, err)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if err := copyFile(src, p, dst, path.Join(to, strings.TrimPrefix(p, root+"/"))); err != nil {
			errs = append(errs, err)
			return nil
		}
		n++
		return nil
	})
	return n, errors.Join(append(errs, err)...)
}

func copyFile(src *workspace.Workspace, from string, dst *workspace.Workspace, to string) error {
	in, _, err := src.OpenRead(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dst.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return out.Close()
}

// askPoll is how often askThread looks for the reply to a question.
const askPoll = 250 * time.Millisecond

// askThread puts an MCP server's question in the task's thread, through
// the observer when it is a Questioner, and waits for the first message a
// person writes there after it (a `!` command aside), at most the
// approvals timeout. The reply is the answer; it is not handed to the
// agent again as a new message.
func (pr *pieceRun) askThread(ctx context.Context, server, question string) (string, bool, error) {
	q, ok := pr.e.cfg.Observer.(Questioner)
	if !ok {
		return "", false, nil
	}
	var since int64
	last, err := pr.e.store.RecentComments(ctx, pr.task.ID, 1)
	if err != nil {
		return "", false, fmt.Errorf("comments of task %d: %w", pr.task.ID, err)
	}
	if len(last) > 0 {
		since = last[0].ID
	}
	text := pr.e.text.fill("mcp_question", map[string]string{"server": server, "question": question})
	if err := q.Question(ctx, pr.task.ID, text); err != nil {
		// Nobody can be asked here (baton run): the server hears no.
		pr.log.Warn("a server's question could not be put in the thread; it is declined", "server", server, "err", err)
		return "", false, nil
	}
	deadline := time.NewTimer(pr.e.cfg.ApprovalTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(askPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", false, ctx.Err()
		case <-deadline.C:
			_ = pr.event(ctx, "mcp_question_timed_out", pr.currentMovement(), server)
			return "", false, nil
		case <-tick.C:
		}
		recent, err := pr.e.store.RecentComments(ctx, pr.task.ID, 10)
		if err != nil {
			pr.log.Warn("reading the reply to a server's question failed", "err", err)
			continue
		}
		for _, c := range recent { // oldest first
			text := strings.TrimSpace(c.Text)
			if c.ID <= since || c.Role != core.RoleUser || strings.HasPrefix(text, "!") {
				continue
			}
			pr.mu.Lock()
			if pr.answered == nil {
				pr.answered = map[int64]bool{}
			}
			pr.answered[c.ID] = true
			pr.mu.Unlock()
			return text, true, nil
		}
	}
}

// cachedShare formats cached ÷ prompt as a whole percentage, "-" when no
// prompt tokens were reported.
func cachedShare(cached, prompt int64) string {
	if prompt <= 0 {
		return "-"
	}
	return strconv.FormatInt(cached*100/prompt, 10) + "%"
}
