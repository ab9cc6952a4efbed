package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/user"
	"strings"
	"sync"
	"time"

	"github.com/baton-bot/baton/adapters/console"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/piece"
)

// Exit codes of baton run beyond the shared ones (SPEC §2).
const (
	exitQuestion = 3 // the agent asked, or a call waits for approval, and stdin is not a terminal
	exitJobEnded = 4 // the job failed or was aborted
)

// consoleUser names the person at the terminal.
func consoleUser(env func(string) string) (id, name string) {
	name = env("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "you"
	}
	return "console:" + name, name
}

// run runs one job in this process on the in-process queue: a new task, or
// task jf.task continued (answering its question, deciding its call that
// waits for approval, or a new request in it).
//
// Progress goes to stderr: a line per movement and tool call, with a
// spinner while the model thinks when stderr is a terminal; the log goes
// to data_dir/logs/baton-run.log unless jf.verbose. When stdout is a
// terminal and the model streams, the answers' text is written there as
// the model writes it.
func (m *Main) run(ctx context.Context, jf jobFlags, instruction string) error {
	var n notices
	_, closeLog, err := m.consoleLog("run", jf.verbose, &n)
	if err != nil {
		return err
	}
	defer closeLog()
	steps := &stepRelay{}
	sys, err := newSystem(ctx, m.Config, m.Logger, systemOptions{role: "run", embedded: true, decide: true, stepper: steps, workspaces: m.workspaces})
	if err != nil {
		return m.systemErr("run", err)
	}
	defer sys.Close()
	m.startChecks("run", sys, m.Stderr)
	view := &runView{pieces: sys.pieces, locale: m.Config.Locale, said: map[int64]string{}}
	opts := console.ScreenOptions{Terminal: isTerminal(m.Stderr), Width: termWidth(m.Stderr)}
	if isTerminal(m.Stdout) {
		opts.Text, view.shown = m.Stdout, true
	}
	view.scr = console.NewScreen(m.Stderr, opts)
	steps.set(view)
	n.set(func(text string) { view.scr.Line("  " + text) })
	spinCtx, stopSpin := context.WithCancel(ctx)
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		view.scr.Run(spinCtx)
	}()
	defer func() {
		stopSpin()
		<-spun
		view.scr.Close()
	}()
	if jf.piece != "" {
		if _, ok := sys.pieces.Lookup(jf.piece); !ok {
			return usageErr("baton run: --piece: no piece named %q (pieces: %s)", jf.piece, strings.Join(sys.pieces.Names(), ", "))
		}
	}
	// Jobs that an earlier process left queued or running are taken up.
	if err := sys.recoverJobs(ctx); err != nil {
		return err
	}
	poolCtx, stopPool := context.WithCancel(context.WithoutCancel(ctx))
	poolDone := make(chan struct{})
	go func() {
		defer close(poolDone)
		_ = sys.pool.Run(poolCtx)
	}()
	defer func() {
		stopPool()
		<-poolDone
	}()

	userID, userName := consoleUser(m.Env)
	task, job, err := m.startRun(ctx, sys, jf, instruction, userID, userName)
	if err != nil {
		return err
	}
	view.scr.Println(fmt.Sprintf("baton: task #%d, job #%d, piece %s\nbaton: workspace %s", task.ID, job.ID, job.Piece, task.Workspace))

	in := bufio.NewReader(m.Stdin)
	for {
		j, err := m.waitJob(ctx, sys, job.ID, view)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return m.interrupt(sys, job.ID, userID, view)
			}
			return err
		}
		view.scr.End(j.ID)
		switch j.State {
		case core.JobSucceeded:
			view.outputFiles(task, j, m.Logger)
			if answer := strings.TrimSpace(j.ResultSummary); !view.wrote(j.ID, answer) {
				fmt.Fprintln(m.Stdout, view.printable(answer))
			}
			return nil
		case core.JobFailed, core.JobAborted:
			// The error's first line is the sentence; the rest (a panic's
			// stack trace) is in the log.
			reason, _, _ := strings.Cut(j.Error, "\n")
			if j.State == core.JobAborted {
				reason = "aborted by " + j.AbortedBy
			}
			return &exitError{code: exitJobEnded, err: fmt.Errorf("baton: job #%d %s: %s", j.ID, j.State, reason)}
		case core.JobWaitingHuman:
			fmt.Fprintln(m.Stdout, view.printable(strings.TrimSpace(j.Question)))
			if !isTerminal(m.Stdin) && j.WaitKind != "" {
				return &exitError{code: exitQuestion, err: fmt.Errorf("baton: task #%d waits as said above; go on with: baton run --task %d continue (or continue N), or abort it", task.ID, task.ID)}
			}
			if !isTerminal(m.Stdin) {
				return &exitError{code: exitQuestion, err: fmt.Errorf("baton: task #%d asks the question above; answer with: baton run --task %d \"your answer\"", task.ID, task.ID)}
			}
			fmt.Fprint(m.Stderr, "> ")
			answer, err := in.ReadString('\n')
			answer = strings.TrimSpace(answer)
			if answer == "" {
				if err == io.EOF || err == nil {
					return &exitError{code: exitQuestion, err: fmt.Errorf("baton: no answer; answer later with: baton run --task %d \"your answer\"", task.ID)}
				}
				return err
			}
			if err := m.answer(ctx, sys, task, j, answer, userID, userName); err != nil {
				return err
			}
		case core.JobWaitingApproval:
			a, err := sys.store.Approval(ctx, j.ID, j.WaitSeq)
			if err != nil {
				return fmt.Errorf("the approval job #%d waits for: %w", j.ID, err)
			}
			later := fmt.Sprintf("baton run --task %d --approve (or --deny [--reason TEXT])", task.ID)
			fmt.Fprintf(m.Stdout, "approval #%d, task #%d: %s (%s)\n%s\n", a.ID, task.ID, a.Tool, a.Rule, view.printable(strings.TrimSpace(a.Preview)))
			if !isTerminal(m.Stdin) {
				return &exitError{code: exitQuestion, err: fmt.Errorf("baton: task #%d waits for approval of the call above; decide with: %s", task.ID, later)}
			}
			v, err := askVerdict(in, m.Stderr)
			if err != nil {
				if err == io.EOF {
					return &exitError{code: exitQuestion, err: fmt.Errorf("baton: no answer; decide later with: %s", later)}
				}
				return err
			}
			if err := m.decide(ctx, sys, task, j, v, "", userID, userName); err != nil {
				return err
			}
		}
	}
}

// askVerdict asks at the terminal for the answer to an approval until one
// comes (console.ParseAnswer); io.EOF when the input ends first.
func askVerdict(in *bufio.Reader, w io.Writer) (core.Verdict, error) {
	for {
		fmt.Fprint(w, console.AnswerPrompt)
		line, err := in.ReadString('\n')
		if v, ok := console.ParseAnswer(line); ok {
			return v, nil
		}
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(line) != "" {
			fmt.Fprintln(w, "baton: answer y (run it), n (deny it) or a (run it, and always allow it from now on)")
		}
	}
}

// decide hands the verdict on the approval job j waits for to the
// conversation service, as the person at the terminal: the service checks
// their right and that the wait is undecided, records the decision and
// resumes the job. A deny with a reason goes as `!deny reason` (buttons
// carry none). What the service refuses is an error with its sentence.
func (m *Main) decide(ctx context.Context, sys *system, task core.Task, j core.Job, v core.Verdict, reason, userID, userName string) error {
	who := chat.Author{ID: userID, Name: userName}
	var r chat.Reply
	var err error
	if v == core.VerdictDeny && reason != "" {
		r, err = sys.chat.HandleCommand(ctx, chat.Command{Name: "deny", Args: reason, Thread: task.Thread, InThread: true, Author: who})
	} else {
		r, err = sys.chat.HandleAction(ctx, chat.Action{Value: string(v) + ":" + core.ApprovalKey(j.ID, j.WaitSeq), Thread: task.Thread, Author: who})
	}
	if err != nil {
		return fmt.Errorf("decide the approval of job #%d: %w", j.ID, err)
	}
	if r.Text != "" {
		return fmt.Errorf("baton: %s", r.Text)
	}
	m.settleOutbox(ctx, sys, task.ID)
	return nil
}

// settleOutbox marks the outbox messages of task taskID delivered: the
// service's decision edits the approval's message, which baton run never
// posted, and a later baton chat, delivering the console's outbox, would
// post it out of nowhere.
func (m *Main) settleOutbox(ctx context.Context, sys *system, taskID int64) {
	due, err := sys.store.DueOutbox(ctx, core.PlatformConsole, time.Now(), 100)
	if err != nil {
		m.Logger.Warn("settling the task's outbox failed", "task", taskID, "err", err)
		return
	}
	for _, o := range due {
		if o.TaskID != taskID {
			continue
		}
		if err := sys.store.OutboxSent(ctx, o.ID, ""); err != nil {
			m.Logger.Warn("settling the task's outbox failed", "task", taskID, "err", err)
		}
	}
}

// startRun creates the job of a baton run, or resumes the waiting one of
// task jf.task with the instruction as the answer.
func (m *Main) startRun(ctx context.Context, sys *system, jf jobFlags, instruction, userID, userName string) (core.Task, core.Job, error) {
	pieceName := jf.piece
	if pieceName == "" {
		pieceName = m.Config.DefaultPiece
	}
	var task core.Task
	if jf.task != 0 {
		t, err := sys.store.Task(ctx, jf.task)
		if errors.Is(err, core.ErrNotFound) {
			return core.Task{}, core.Job{}, usageErr("baton run: --task: there is no task #%d", jf.task)
		}
		if err != nil {
			return core.Task{}, core.Job{}, err
		}
		task = t
		active, err := sys.store.ActiveJob(ctx, t.ID)
		switch {
		case jf.decision != "" && err == nil && active.State == core.JobWaitingApproval:
			return task, active, m.decide(ctx, sys, task, active, jf.decision, jf.reason, userID, userName)
		case jf.decision != "" && (err == nil || errors.Is(err, core.ErrNotFound)):
			return task, active, usageErr("baton run: task #%d has no call waiting for approval", t.ID)
		case err == nil && active.State == core.JobWaitingApproval:
			return task, active, usageErr("baton run: task #%d waits for approval of a call (job #%d); decide with: baton run --task %d --approve (or --deny [--reason TEXT])", t.ID, active.ID, t.ID)
		case err == nil && active.State == core.JobWaitingHuman:
			return task, active, m.answer(ctx, sys, task, active, instruction, userID, userName)
		case err == nil:
			return task, active, usageErr("baton run: task #%d already has job #%d %s; wait for it or abort it first", t.ID, active.ID, active.State)
		case !errors.Is(err, core.ErrNotFound):
			return task, core.Job{}, err
		}
	} else {
		t, _, err := sys.store.EnsureTask(ctx, core.Task{
			Thread:    core.ThreadRef{Platform: core.PlatformConsole, Channel: "run", Thread: fmt.Sprintf("%d", time.Now().UnixNano())},
			OwnerUser: userID,
			Title:     title(instruction),
		})
		if err != nil {
			return core.Task{}, core.Job{}, err
		}
		task = t
	}
	if _, err := sys.store.AddComment(ctx, core.Comment{TaskID: task.ID, AuthorID: userID, AuthorName: userName, Role: core.RoleUser, Text: instruction, CreatedAt: time.Now()}); err != nil {
		return task, core.Job{}, err
	}
	j, err := sys.dispatch.Create(ctx, core.Job{TaskID: task.ID, Piece: pieceName, Instruction: instruction})
	return task, j, err
}

// answer stores the person's answer and resumes the waiting job.
func (m *Main) answer(ctx context.Context, sys *system, task core.Task, j core.Job, text, userID, userName string) error {
	if _, _, ok := core.ParseContinue(text); j.WaitKind != "" && !ok {
		// The engine's question (a budget, a loop guard) takes only a
		// continue; nothing is stored.
		return usageErr("baton run: task #%d waits for continue (or continue N with a positive number), not %q; nothing changed", task.ID, text)
	}
	if _, err := sys.store.AddComment(ctx, core.Comment{TaskID: task.ID, AuthorID: userID, AuthorName: userName, Role: core.RoleUser, Text: text, CreatedAt: time.Now()}); err != nil {
		return err
	}
	if _, err := sys.dispatch.Resume(ctx, j.ID, j.WaitSeq); err != nil {
		return err
	}
	return nil
}

// waitJob waits until job id succeeds, fails, is aborted or waits for a
// person (an answer or an approval), printing its progress.
func (m *Main) waitJob(ctx context.Context, sys *system, id int64, p *runView) (core.Job, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		p.print(ctx, sys.store, id)
		j, err := sys.store.Job(context.WithoutCancel(ctx), id)
		if err != nil {
			return core.Job{}, err
		}
		if j.State.Terminal() || j.State == core.JobWaitingHuman || j.State == core.JobWaitingApproval {
			p.print(ctx, sys.store, id)
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-t.C:
		}
	}
}

// interrupt aborts the job after Ctrl-C and waits briefly for it to stop.
func (m *Main) interrupt(sys *system, id int64, userID string, p *runView) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.scr.Println("baton: interrupted; aborting the job")
	if _, err := sys.dispatch.Abort(ctx, id, userID); err != nil {
		m.Logger.Warn("abort failed", "job", id, "err", err)
	}
	for ctx.Err() == nil {
		j, err := sys.store.Job(ctx, id)
		if err != nil || j.State.Terminal() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &exitError{code: exitInterrupted, err: context.Canceled, reported: true}
}

// runView shows a baton run job's progress on stderr: from the engine's
// steps, a line per movement and tool call and the spinner (on a
// terminal); from the job's events in the store, what else people should
// know (a refused transition, the context filling up, approvals, a lost
// lease or a requeue).
//
// When stdout is a terminal (shown), the text the model writes goes there
// as it streams in (the Screen's Stream), and a job's answer that its last
// turn already wrote is not printed again.
type runView struct {
	scr    *console.Screen
	pieces *piece.Library
	locale string
	shown  bool // stdout is a terminal: the model's text is streamed to it
	seen   int  // events printed (print only: waitJob's goroutine)

	mu   sync.Mutex
	said map[int64]string // guarded by mu: by job, the text streamed since its last request began
}

var (
	_ engine.Stepper = (*runView)(nil)
	_ texter         = (*runView)(nil)
)

// Step implements engine.Stepper.
func (p *runView) Step(ctx context.Context, s engine.Step) {
	switch s.Kind {
	case engine.StepMovement:
		pc, _ := p.pieces.Lookup(s.Piece)
		p.scr.Line("· " + s.Piece + ": " + chat.MovementText(p.locale, pc, s.Movement, s.MovementCount))
		p.scr.Begin(s.JobID, "thinking", s.At)
	case engine.StepThinking:
		p.forget(s.JobID)
		p.scr.Begin(s.JobID, "thinking", s.At)
	case engine.StepTool:
		p.scr.Line("  " + console.StepLine(s))
		p.scr.Begin(s.JobID, s.Tool, s.At)
	case engine.StepDone:
		p.scr.End(s.JobID)
	}
}

// Text implements texter: on a terminal, the text goes to stdout as it
// comes.
func (p *runView) Text(jobID int64, delta string) {
	if !p.shown {
		return
	}
	p.scr.Stream(delta)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.said[jobID] += delta
}

// TextRestart implements texter: the text shown stays on the terminal,
// and a line says that the model writes it again.
func (p *runView) TextRestart(jobID int64) {
	if !p.shown {
		return
	}
	p.forget(jobID)
	p.scr.Line("  (the model's reply was cut off; it is asked for again)")
}

// forget drops the text streamed for job jobID.
func (p *runView) forget(jobID int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.said, jobID)
}

// wrote reports whether the last request of job jobID streamed answer
// (spaces around it aside) to the terminal.
func (p *runView) wrote(jobID int64, answer string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shown && answer != "" && strings.TrimSpace(console.Printable(p.said[jobID])) == console.Printable(answer)
}

// printable is text for stdout: on a terminal without the control
// characters that would steer it, elsewhere as it is.
func (p *runView) printable(text string) string {
	if p.shown {
		return console.Printable(text)
	}
	return text
}

// print prints the job's events recorded since the last call that the
// steps do not show.
func (p *runView) print(ctx context.Context, st interface {
	Events(ctx context.Context, jobID int64) ([]core.JobEvent, error)
}, id int64) {
	evs, err := st.Events(context.WithoutCancel(ctx), id)
	if err != nil || len(evs) <= p.seen {
		return
	}
	for _, e := range evs[p.seen:] {
		switch {
		case e.Kind == "tool" && strings.Contains(e.Detail, " → error: "):
			_, msg, _ := strings.Cut(e.Detail, " → error: ")
			p.scr.Line("    → error: " + msg)
		case e.Kind == "prompt_truncated":
			p.scr.Line("  warning: " + e.Detail)
		case e.Kind == "transition_refused":
			p.scr.Line("  transition refused: " + e.Detail)
		case strings.HasPrefix(e.Kind, "context_"):
			p.scr.Line("  " + e.Detail)
		case e.Kind == core.EventApprovalAsked, e.Kind == core.EventApprovalDecided:
			p.scr.Line("  " + e.Detail)
		case e.Kind == core.EventLeaseLost, e.Kind == core.EventRequeued, e.Kind == core.EventError:
			p.scr.Line("  " + e.Kind + ": " + e.Detail)
		}
	}
	p.seen = len(evs)
}

// outputFiles lists the files job j left in its task's output/, with their
// paths.
func (p *runView) outputFiles(task core.Task, j core.Job, log *slog.Logger) {
	files, err := chat.OutputFiles(task.Workspace, j.StartedAt, 0)
	if err != nil {
		log.Warn("listing output/ failed", "task", task.ID, "err", err)
	}
	for _, f := range files {
		p.scr.Println(fmt.Sprintf("baton: file %s (%d bytes)", f.Path, f.Size))
	}
}

// clip cuts s to n runes on one line.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// title makes a task title from its first request.
func title(instruction string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(instruction), "\n")
	return clip(line, 80)
}
