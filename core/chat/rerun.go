package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-bot/baton/core"
)

// ErrRerun is wrapped by the errors of Rerun and RetryJob that say why a
// request cannot be carried out (a plain sentence, shown as it is): a job
// still running, a movement the piece no longer has, a movement the job
// never started.
var ErrRerun = errors.New("cannot re-run")

// rerunError is an ErrRerun with its sentence.
type rerunError struct{ text string }

func (e *rerunError) Error() string { return e.text }
func (e *rerunError) Unwrap() error { return ErrRerun }

// modelName is what a model override may look like.
var modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$`)

// Rerun is a request to re-run a finished job from one of its movements.
type Rerun struct {
	JobID    int64
	Movement string
	// Model, when set, is the model the new job asks in every movement.
	Model string
	// Note, when set, is appended to the instruction.
	Note string
	By   string // who asked, for the record
}

// Rerun starts a new job for the task of r.JobID from r.Movement, with
// the state (lessons, verify feedback, handover) the job had when that
// movement started, recorded by the engine as a core.EventMovementState.
// The new job is linked to the original (RetryOf) and carries a
// core.EventRerun. The job must be finished, its task without an active
// job, and its piece must still have the movement; each refusal wraps
// ErrRerun. When only the enqueue failed, the stored job is returned with
// the error (it waits for the reconciler).
func (s *Service) Rerun(ctx context.Context, r Rerun) (core.Job, error) {
	old, err := s.store.Job(ctx, r.JobID)
	if err != nil {
		return core.Job{}, fmt.Errorf("rerun job %d: %w", r.JobID, err)
	}
	if !old.State.Terminal() {
		return core.Job{}, &rerunError{s.say("rerun_not_finished", "job", strconv.FormatInt(old.ID, 10), "state", string(old.State))}
	}
	if r.Model != "" && !modelName.MatchString(r.Model) {
		return core.Job{}, &rerunError{s.say("rerun_bad_model")}
	}
	if r.Model, err = s.model(r.Model); err != nil {
		return core.Job{}, err
	}
	if s.cfg.Pieces != nil {
		pc, ok := s.cfg.Pieces.Lookup(old.Piece)
		if !ok {
			return core.Job{}, &rerunError{s.say("rerun_no_piece", "piece", old.Piece)}
		}
		if _, ok := pc.Movement(r.Movement); !ok {
			return core.Job{}, &rerunError{s.say("rerun_no_movement", "piece", old.Piece, "movement", r.Movement)}
		}
	}
	evs, err := s.store.Events(ctx, old.ID)
	if err != nil {
		return core.Job{}, fmt.Errorf("rerun job %d: %w", old.ID, err)
	}
	state, found := "", false
	for _, e := range evs { // the movement's first start: a re-run bisects the run as it went
		if e.Kind == core.EventMovementState && e.Movement == r.Movement {
			state, found = e.Detail, true
			break
		}
	}
	if !found {
		return core.Job{}, &rerunError{s.say("rerun_never_ran", "job", strconv.FormatInt(old.ID, 10), "movement", r.Movement)}
	}
	if r.Model != "" {
		if state, err = withModel(state, r.Model); err != nil {
			return core.Job{}, fmt.Errorf("rerun job %d: %w", old.ID, err)
		}
	}
	if j, err := s.store.ActiveJob(ctx, old.TaskID); err == nil {
		return core.Job{}, &rerunError{s.say("busy", "job", strconv.FormatInt(j.ID, 10), "state", string(j.State))}
	} else if !errors.Is(err, core.ErrNotFound) {
		return core.Job{}, fmt.Errorf("rerun job %d: %w", old.ID, err)
	}
	instruction := old.Instruction
	if note := strings.TrimSpace(r.Note); note != "" {
		instruction += "\n\n" + note
	}
	j, err := s.dispatch.Create(ctx, core.Job{
		TaskID: old.TaskID, ParentJobID: old.ParentJobID, RetryOf: old.ID, Piece: old.Piece, Instruction: instruction,
		Movement: r.Movement, Lessons: state, TriggerMsgID: old.TriggerMsgID,
	})
	if j.ID == 0 {
		return core.Job{}, err
	}
	detail := fmt.Sprintf("job %d from %s", old.ID, r.Movement)
	if r.Model != "" {
		detail += ", model " + r.Model
	}
	if r.By != "" {
		detail += ", by " + r.By
	}
	if aerr := s.store.AddEvent(ctx, core.JobEvent{JobID: j.ID, Kind: core.EventRerun, Movement: r.Movement, Detail: detail}); aerr != nil {
		s.log.Warn("recording a re-run failed", "job", j.ID, "err", aerr)
	}
	if err != nil {
		s.log.Warn("the job waits in the store until the queue answers", "job", j.ID, "task", j.TaskID, "err", err)
	}
	return j, nil
}

// withModel sets the model override of an engine state.
func withModel(state, model string) (string, error) {
	m := map[string]any{}
	if strings.TrimSpace(state) != "" {
		if err := json.Unmarshal([]byte(state), &m); err != nil {
			return "", fmt.Errorf("read the movement's state: %w", err)
		}
	}
	m["model"] = model
	b, err := json.Marshal(m)
	return string(b), err
}

// RetryJob starts a new job where job id, failed or aborted, stopped: at
// its movement, with its lessons and a fresh budget (what `!retry` does
// for a thread's last job). Refusals wrap ErrRerun.
func (s *Service) RetryJob(ctx context.Context, id int64, by string) (core.Job, error) {
	old, err := s.store.Job(ctx, id)
	if err != nil {
		return core.Job{}, fmt.Errorf("retry job %d: %w", id, err)
	}
	if old.State != core.JobFailed && old.State != core.JobAborted {
		return core.Job{}, &rerunError{s.say("retry_nothing")}
	}
	if j, err := s.store.ActiveJob(ctx, old.TaskID); err == nil {
		return core.Job{}, &rerunError{s.say("busy", "job", strconv.FormatInt(j.ID, 10), "state", string(j.State))}
	}
	j, err := s.dispatch.Create(ctx, core.Job{
		TaskID: old.TaskID, ParentJobID: old.ParentJobID, RetryOf: old.ID, Piece: old.Piece, Instruction: old.Instruction,
		Movement: old.Movement, Lessons: old.Lessons, TriggerMsgID: old.TriggerMsgID,
	})
	if j.ID == 0 {
		return core.Job{}, err
	}
	if err != nil {
		s.log.Warn("the job waits in the store until the queue answers", "job", j.ID, "task", j.TaskID, "err", err)
	}
	return j, nil
}

// AbortJob requests the abort of job id by who (see worker.Dispatch.Abort).
func (s *Service) AbortJob(ctx context.Context, id int64, by string) (core.Job, error) {
	return s.dispatch.Abort(ctx, id, by)
}

// model is the model a re-run's name stands for: with Config.Models set,
// an alias's model, or a model an alias stands for, and a refusal naming
// the aliases otherwise; without, name itself.
func (s *Service) model(name string) (string, error) {
	if name == "" || len(s.cfg.Models) == 0 {
		return name, nil
	}
	if m, ok := s.cfg.Models[name]; ok {
		return m, nil
	}
	var aliases []string
	for alias, m := range s.cfg.Models {
		if m == name {
			return name, nil
		}
		aliases = append(aliases, alias)
	}
	slices.Sort(aliases)
	return "", &rerunError{s.say("rerun_unknown_model", "model", name, "models", strings.Join(aliases, ", "))}
}

// rerunCommand is `!rerun MOVEMENT [--model M] [note…]`: it re-runs the
// thread's last finished job from MOVEMENT.
func (s *Service) rerunCommand(ctx context.Context, task core.Task, who Author, args string) (Reply, error) {
	if task.ID == 0 {
		return Reply{Text: s.say("no_task")}, nil
	}
	if !s.mayAbort(task, who) {
		return Reply{Text: s.say("not_allowed_abort")}, nil
	}
	fields := strings.Fields(args)
	if len(fields) == 0 || strings.HasPrefix(fields[0], "-") {
		return Reply{Text: s.say("rerun_usage")}, nil
	}
	r := Rerun{Movement: fields[0], By: who.ID}
	var note []string
	for i := 1; i < len(fields); i++ {
		switch f := fields[i]; {
		case f == "--model" && i+1 < len(fields):
			r.Model = fields[i+1]
			i++
		case strings.HasPrefix(f, "--model="):
			r.Model = strings.TrimPrefix(f, "--model=")
		case strings.HasPrefix(f, "--"):
			return Reply{Text: s.say("rerun_usage")}, nil
		default:
			note = append(note, f)
		}
	}
	r.Note = strings.Join(note, " ")
	jobs, err := s.store.Jobs(ctx, core.JobFilter{TaskID: task.ID, Limit: 1})
	if err != nil {
		return Reply{}, err
	}
	if len(jobs) == 0 {
		return Reply{Text: s.say("status_none", "task", "#"+strconv.FormatInt(task.ID, 10))}, nil
	}
	r.JobID = jobs[0].ID
	j, err := s.Rerun(ctx, r)
	if errors.Is(err, ErrRerun) {
		return Reply{Text: err.Error()}, nil
	}
	if err != nil {
		return Reply{}, err
	}
	return Reply{Text: s.say("rerun_started", "old", strconv.FormatInt(r.JobID, 10), "job", strconv.FormatInt(j.ID, 10), "movement", r.Movement), Public: true}, nil
}
