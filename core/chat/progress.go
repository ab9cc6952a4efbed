package chat

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
)

// Step states of a ProgressView, as Slack's task cards name them.
const (
	StepPending    = "pending"
	StepInProgress = "in_progress"
	StepComplete   = "complete"
	StepError      = "error"
)

// ProgressStep is one line of a job's live progress: a movement of its
// plan or a tool call.
type ProgressStep struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	State string `json:"state"` // StepPending, StepInProgress, StepComplete or StepError
}

// ProgressView is what a job's progress message shows at one moment: the
// whole state, not a change, so that a later view replaces an earlier one
// and a view lost or skipped loses nothing.
type ProgressView struct {
	JobID int64 `json:"job_id"`
	// Version grows with every event the view includes; a view older
	// than one delivered is not shown.
	Version int64          `json:"version"`
	Piece   string         `json:"piece,omitempty"`
	Plan    []ProgressStep `json:"plan,omitempty"` // the piece's movements, in order
	Current int            `json:"current,omitempty"`
	Tools   []ProgressStep `json:"tools,omitempty"` // the last maxTools tool calls, oldest first
	// Text is the answer as the model has written it so far (cut to
	// maxText bytes).
	Text     string `json:"text,omitempty"`
	Approval string `json:"approval,omitempty"` // the call waiting for a person
	// Final closes the message: the job is over (or waits). Answer, with
	// Final, is the job's answer; the deliverer delivers it exactly once,
	// in the closing of the progress message or as posts of its own.
	Final  bool   `json:"final,omitempty"`
	Answer string `json:"answer,omitempty"`
	// Every is the least time between two updates of the message
	// (progress.interval).
	Every time.Duration `json:"every,omitempty"`
	// Owner is the task's requester (core.Task.OwnerUser), set by the
	// deliverer: the person a platform streams the message to.
	Owner string `json:"-"`
}

// Bounds of a ProgressView.
const (
	maxTools = 100
	maxText  = 12_000
)

// ProgressPoster is a Poster that shows a job's progress as one live
// message (Slack's streaming messages, Discord's edited embed). The
// deliverer calls it one call at a time per thread, paced as posts.
type ProgressPoster interface {
	// Progress shows v in the progress message msgID ("" starts one) and
	// returns the message's id. With v.Final it closes the message, with
	// answer as its last text when answer is not "" (answer fits
	// Limits().Post). It fails with ErrNoProgress when the platform
	// refuses live messages here (the deliverer then edits the status
	// message instead) and with ErrProgressGone when msgID no longer
	// takes updates (deleted: the deliverer starts another).
	Progress(ctx context.Context, thread core.ThreadRef, msgID string, v ProgressView, answer string) (id string, answered bool, err error)
}

var (
	// ErrNoProgress: the platform refuses live progress messages.
	ErrNoProgress = errors.New("live progress refused by the platform")
	// ErrProgressGone: the progress message no longer exists.
	ErrProgressGone = errors.New("progress message gone")
)

// ProgressSettings configure the live progress of one platform
// (progress.stream, progress.interval).
type ProgressSettings struct {
	Stream   bool
	Interval time.Duration // least time between two views of a job; 1s when 0
}

// ProgressRef is the outbox Ref of the progress views of job jobID's
// run under attempt: each run (a resumed job's too) has a message of its
// own.
func ProgressRef(jobID, attempt int64) string {
	return "progress:" + strconv.FormatInt(jobID, 10) + "." + strconv.FormatInt(attempt, 10)
}

// startProgress begins the live progress of job j's run: what an earlier
// run of it showed is left behind.
func (s *Service) startProgress(j core.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.progress == nil {
		s.progress = map[int64]*progressJob{}
	}
	if old, ok := s.progress[j.ID]; ok && old.timer != nil {
		old.timer.Stop()
	}
	s.forgetClosed()
	s.progress[j.ID] = &progressJob{ref: ProgressRef(j.ID, j.Attempt), attempt: j.Attempt, every: time.Second, view: ProgressView{JobID: j.ID, Piece: j.Piece}}
}

// RenderProgress is v as text, for a platform that edits a plain status
// message: the plan's position, then the last few tool calls.
func RenderProgress(locale string, v ProgressView, lines int) string {
	var b strings.Builder
	if v.Current > 0 && v.Current <= len(v.Plan) {
		b.WriteString("⏳ " + say(locale, "progress_plan", "piece", v.Piece, "position", strconv.Itoa(v.Current),
			"n", strconv.Itoa(len(v.Plan)), "movement", v.Plan[v.Current-1].Title))
	} else {
		b.WriteString("⏳ " + v.Piece)
	}
	tools := v.Tools
	if lines > 0 && len(tools) > lines {
		tools = tools[len(tools)-lines:]
	}
	for _, t := range tools {
		b.WriteString("\n" + StepMark(t.State) + " " + t.Title)
	}
	if v.Approval != "" {
		b.WriteString("\n✋ " + say(locale, "progress_approval", "call", v.Approval))
	} else if v.Text != "" && !v.Final {
		b.WriteString("\n✍️ " + say(locale, "progress_answering"))
	}
	return b.String()
}

// ProgressStatus is v as a short status line for a platform that shows
// one beside its assistant's thread (Slack's assistant.threads.setStatus),
// such as "is running Read core/job.go…"; "" once v is final, which
// clears it.
func ProgressStatus(locale string, v ProgressView) string {
	switch {
	case v.Final:
		return ""
	case v.Approval != "":
		return say(locale, "progress_status_approval")
	}
	if n := len(v.Tools); n > 0 && v.Tools[n-1].State == StepInProgress {
		return say(locale, "progress_status_tool", "call", v.Tools[n-1].Title)
	}
	if v.Text != "" {
		return say(locale, "progress_status_answering")
	}
	return say(locale, "progress_status_thinking")
}

// StepMark is a step state as one symbol.
func StepMark(state string) string {
	switch state {
	case StepComplete:
		return "✓"
	case StepError:
		return "✗"
	case StepInProgress:
		return "…"
	}
	return "·"
}

// progressJob is the live progress of one running job.
type progressJob struct {
	ref string // the outbox Ref of its views
	// attempt is the run's attempt, which its events are fenced on (0:
	// unknown, unfenced): a run that lost its lease records nothing after
	// the job's newer run.
	attempt int64
	// writing is held while its events are written, so that two
	// batches are recorded in the order they were told.
	writing sync.Mutex
	view    ProgressView
	events  []core.ProgressEvent // told since the last write
	last    time.Time            // the last write
	every   time.Duration        // the least time between two writes: the thread's platform's progress.interval
	timer   *time.Timer          // a write to come; nil when none
	closed  bool                 // the job finished: nothing more is written
	stopped bool                 // the job's thread takes no progress
	known   bool                 // the thread's platform was looked up: stream and every hold its settings
	stream  bool                 // the thread shows live progress
}

// settings are the progress settings of platform p.
func (s *Service) settings(p core.Platform) ProgressSettings {
	st := s.cfg.Progress[p]
	if st.Interval <= 0 {
		st.Interval = time.Second
	}
	return st
}

var _ engine.Progresser = (*Service)(nil)

// Progress implements engine.Progresser: ev goes into its job's view, and
// the view is written to the outbox (and ev to the job's events) at most
// once per progress.interval, from a goroutine of its own: the caller
// never waits for the store.
func (s *Service) Progress(_ context.Context, ev core.ProgressEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.progress == nil {
		s.progress = map[int64]*progressJob{}
	}
	pj, ok := s.progress[ev.JobID]
	if !ok {
		s.forgetClosed()
		pj = &progressJob{ref: ProgressRef(ev.JobID, 0), every: time.Second, view: ProgressView{JobID: ev.JobID}}
		s.progress[ev.JobID] = pj
	}
	if pj.closed || pj.stopped {
		return
	}
	apply(&pj.view, ev)
	if n := len(pj.events); n > 0 && ev.Kind == core.ProgressText && pj.events[n-1].Kind == core.ProgressText {
		pj.events[n-1].Text += ev.Text
	} else {
		pj.events = append(pj.events, ev)
	}
	if pj.timer != nil {
		return
	}
	wait := time.Duration(0)
	if !pj.last.IsZero() {
		wait = pj.last.Add(pj.every).Sub(s.cfg.Now())
	}
	task := ev.TaskID
	pj.timer = time.AfterFunc(max(wait, 0), func() { s.writeProgress(ev.JobID, task) })
}

// apply folds ev into v.
func apply(v *ProgressView, ev core.ProgressEvent) {
	v.Version++
	if len(v.Plan) == 0 && len(ev.Plan) > 0 {
		for _, name := range ev.Plan {
			v.Plan = append(v.Plan, ProgressStep{ID: "movement:" + name, Title: name, State: StepPending})
		}
	}
	switch ev.Kind {
	case core.ProgressMovementStarted:
		v.Current, v.Approval = ev.Position, ""
		setPlan(v, ev.Position, StepInProgress)
	case core.ProgressMovementEnded:
		setPlan(v, ev.Position, StepComplete)
	case core.ProgressToolStarted:
		v.Tools = append(v.Tools, ProgressStep{ID: "tool:" + ev.CallID, Title: ev.Title, State: StepInProgress})
		if len(v.Tools) > maxTools {
			v.Tools = append(v.Tools[:0:0], v.Tools[len(v.Tools)-maxTools:]...)
		}
	case core.ProgressToolFinished:
		state := StepComplete
		if ev.Failed {
			state = StepError
		}
		for i := len(v.Tools) - 1; i >= 0; i-- {
			if v.Tools[i].ID == "tool:"+ev.CallID {
				v.Tools[i].State = state
				break
			}
		}
	case core.ProgressApproval:
		v.Approval = ev.Title
	case core.ProgressText:
		if len(v.Text)+len(ev.Text) <= maxText {
			v.Text += ev.Text
		}
	}
}

func setPlan(v *ProgressView, position int, state string) {
	if position > 0 && position <= len(v.Plan) {
		v.Plan[position-1].State = state
	}
}

// maxProgress is how many jobs' progress the service keeps before it
// forgets those that finished.
const maxProgress = 10_000

// forgetClosed drops the entries of finished jobs once there are more
// than maxProgress, before an entry is added: without it the map holds one
// entry for every job the process ever ran. A finished job's entry is
// kept until then so that a progress event told after the job's end (a
// late tool result) is dropped, not shown as a new run's; it holds no
// view. Callers hold s.mu.
func (s *Service) forgetClosed() {
	if len(s.progress) < maxProgress {
		return
	}
	for id, pj := range s.progress {
		if pj.closed {
			delete(s.progress, id)
		}
	}
}

// writeProgress writes job jobID's view to the outbox and its events to
// the job's history.
func (s *Service) writeProgress(jobID, taskID int64) {
	ctx := context.Background()
	s.mu.Lock()
	pj := s.progress[jobID]
	if pj == nil { // closed and forgotten while this write was due
		s.mu.Unlock()
		return
	}
	if pj.closed || pj.stopped {
		pj.timer = nil
		s.mu.Unlock()
		return
	}
	// pj.timer stays set until the write is done, so that no other
	// write of the job starts meanwhile and Progress only adds to the
	// next batch; pj.writing, taken before the events are, orders this
	// batch before the one finalProgress writes.
	pj.last = s.cfg.Now()
	pj.writing.Lock()
	view, events, ref, known := pj.view, pj.events, pj.ref, pj.known
	view.Plan, view.Tools = append([]ProgressStep(nil), view.Plan...), append([]ProgressStep(nil), view.Tools...)
	pj.events = nil
	s.mu.Unlock()
	s.writeBatch(ctx, pj, jobID, taskID, view, events, ref, known)
	pj.writing.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	pj.timer = nil
	if len(pj.events) > 0 && !pj.closed && !pj.stopped {
		wait := pj.last.Add(pj.every).Sub(s.cfg.Now())
		pj.timer = time.AfterFunc(max(wait, 0), func() { s.writeProgress(jobID, taskID) })
	}
}

// writeBatch records events as job jobID's events and, when its thread
// streams, writes view to the outbox. known says the thread's platform
// was looked up before (pj.stream holds it).
func (s *Service) writeBatch(ctx context.Context, pj *progressJob, jobID, taskID int64, view ProgressView, events []core.ProgressEvent, ref string, known bool) {
	s.recordEvents(ctx, pj, jobID, events)
	if !known {
		task, ok := s.speaks(ctx, core.Job{ID: jobID, TaskID: taskID})
		set := s.settings(task.Thread.Platform)
		piece := ""
		if ok && set.Stream && view.Piece == "" {
			if j, err := s.store.Job(ctx, jobID); err == nil {
				piece = j.Piece
			}
		}
		s.mu.Lock()
		pj.known, pj.stopped, pj.stream, pj.every = true, !ok, ok && set.Stream, set.Interval
		if piece != "" {
			pj.view.Piece = piece
		}
		s.mu.Unlock()
		view.Piece = cmp.Or(view.Piece, piece)
	}
	s.mu.Lock()
	stream, closed := pj.stream, pj.closed
	s.mu.Unlock()
	if !stream || closed {
		return // the events are recorded; the thread keeps its status message
	}
	s.mu.Lock()
	view.Every = pj.every
	s.mu.Unlock()
	msg := core.OutboxMessage{TaskID: taskID, JobID: jobID, Kind: core.OutboxUpdate, Ref: ref,
		Payload: Payload{Progress: &view, Buttons: s.runningMsgButtons(jobID)}.Encode()}
	if err := s.store.AddOutbox(ctx, msg); err != nil {
		s.log.Warn("writing a progress view failed", "job", jobID, "err", err)
		return
	}
	s.cfg.Kick()
}

// recordEvents records events, told by job jobID, as its job events
// (EventProgress); the caller holds pj.writing.
func (s *Service) recordEvents(ctx context.Context, pj *progressJob, jobID int64, events []core.ProgressEvent) {
	for _, ev := range events {
		err := s.store.AddEvent(ctx, core.JobEvent{JobID: jobID, At: ev.At, Kind: EventProgress, Movement: ev.Movement, Detail: EncodeEvent(ev),
			Attempt: pj.attempt})
		if errors.Is(err, core.ErrStale) {
			s.log.Info("progress of a run that no longer holds its job is dropped", "job", jobID, "attempt", pj.attempt)
			return
		}
		if err != nil {
			s.log.Warn("recording a progress event failed", "job", jobID, "err", err)
			return
		}
	}
}

// finalProgress closes job j's live progress: nothing more is written for
// it, and, when its thread's platform streams and the job told any
// progress, the view to close its progress message with, answer the
// job's answer ("" when it has none). ok is false when there is none to
// close: the job's messages stay as they were.
func (s *Service) finalProgress(ctx context.Context, task core.Task, j core.Job, answer string) (core.OutboxMessage, bool) {
	s.mu.Lock()
	pj, ok := s.progress[j.ID]
	if !ok || pj.closed {
		s.mu.Unlock()
		return core.OutboxMessage{}, false
	}
	pj.closed = true
	if pj.timer != nil {
		pj.timer.Stop()
		pj.timer = nil
	}
	events := pj.events
	pj.events = nil
	s.mu.Unlock()
	// The events not written yet are written now, before the job's
	// finish: a reader of them that sees the job over has them all.
	pj.writing.Lock()
	s.recordEvents(ctx, pj, j.ID, events)
	pj.writing.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	v := pj.view
	pj.view = ProgressView{} // a closed job's entry is a marker only: see forgetClosed
	if pj.stopped || !s.settings(task.Thread.Platform).Stream {
		return core.OutboxMessage{}, false
	}
	v.Version++
	v.Final, v.Answer, v.Approval, v.Every = true, answer, "", pj.every
	if v.Piece == "" {
		v.Piece = j.Piece
	}
	return core.OutboxMessage{Kind: core.OutboxUpdate, Ref: pj.ref, Payload: Payload{Progress: &v}.Encode()}, true
}

// streaming reports whether threads on platform p show jobs' progress
// live, so that their status messages are not edited meanwhile.
func (s *Service) streaming(p core.Platform) bool { return s.settings(p).Stream }

// EventProgress is the job event kind of a progress event; its Detail is
// the event's JSON (EncodeEvent).
const EventProgress = "progress_event"

// EncodeEvent is ev's JSON.
func EncodeEvent(ev core.ProgressEvent) string {
	b, _ := json.Marshal(ev) // plain fields: cannot fail
	return string(b)
}
