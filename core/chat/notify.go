package chat

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/core/workspace"
)

var _ worker.Notifier = (*Service)(nil)

// maxUploads bounds the output files posted with one answer.
const maxUploads = 10

// react is an outbox message adding emoji to msgID (nothing when msgID is
// empty: a job with no triggering message).
func react(msgID, emoji string) core.OutboxMessage {
	if msgID == "" {
		return core.OutboxMessage{}
	}
	return core.OutboxMessage{Kind: core.OutboxReact, Payload: Payload{MsgID: msgID, Emoji: emoji}.Encode()}
}

func unreact(msgID, emoji string) core.OutboxMessage {
	m := react(msgID, emoji)
	if m.Kind != "" {
		m.Kind = core.OutboxUnreact
	}
	return m
}

func postMsg(text string) core.OutboxMessage {
	return core.OutboxMessage{Kind: core.OutboxPost, Payload: Payload{Text: text}.Encode()}
}

func statusMsg(text string) core.OutboxMessage {
	return core.OutboxMessage{Kind: core.OutboxUpdate, Payload: Payload{Text: text}.Encode()}
}

// runningMsg is the status of job jobID while it runs, with its Stop
// button.
func (s *Service) runningMsg(jobID int64, text string) core.OutboxMessage {
	return core.OutboxMessage{Kind: core.OutboxUpdate, Payload: Payload{Text: text, Buttons: s.runningMsgButtons(jobID)}.Encode()}
}

// runningMsgButtons are the buttons of job jobID's status while it runs.
func (s *Service) runningMsgButtons(jobID int64) []Button {
	return []Button{{Action: actionStop + ":" + strconv.FormatInt(jobID, 10), Label: s.say("button_stop"), Style: StyleDanger}}
}

// compact drops empty messages and fills task and job.
func compact(j core.Job, msgs ...core.OutboxMessage) []core.OutboxMessage {
	out := msgs[:0]
	for _, m := range msgs {
		if m.Kind == "" {
			continue
		}
		m.TaskID, m.JobID = j.TaskID, j.ID
		out = append(out, m)
	}
	return out
}

// speaks reports whether the job's thread hears from the bot: subtasks post
// nothing themselves, their parent's status lists them.
func (s *Service) speaks(ctx context.Context, j core.Job) (core.Task, bool) {
	t, err := s.store.Task(ctx, j.TaskID)
	if err != nil {
		s.log.Warn("task of a job not found", "job", j.ID, "err", err)
		return core.Task{}, false
	}
	return t, t.Thread.Platform != core.PlatformSubtask && j.ParentJobID == 0
}

// postJob writes messages about job j outside any job transition.
func (s *Service) postJob(ctx context.Context, j core.Job, text string, more ...core.OutboxMessage) {
	msgs := compact(j, append([]core.OutboxMessage{postMsg(text)}, more...)...)
	if err := s.store.AddOutbox(ctx, msgs...); err != nil {
		s.log.Error("writing to the outbox failed", "job", j.ID, "err", err)
		return
	}
	s.cfg.Kick()
}

// Claimed implements worker.Notifier: 👀 on the message that started the
// job, and its status message.
func (s *Service) Claimed(ctx context.Context, j core.Job) []core.OutboxMessage {
	s.startProgress(j)
	if _, ok := s.speaks(ctx, j); !ok {
		return nil
	}
	defer s.cfg.Kick()
	// The claimed status counts as the first edit: progress follows it
	// statusEvery later at the soonest.
	s.mu.Lock()
	s.statusWritten(j.ID, s.cfg.Now())
	s.mu.Unlock()
	return compact(j, react(j.TriggerMsgID, EmojiClaimed), s.runningMsg(j.ID, s.say("claimed", "piece", j.Piece)))
}

// Finishing implements worker.Notifier: the answer, the question or the
// failure as a post of its own, the files the job wrote to output/, the
// final reaction and status.
func (s *Service) Finishing(ctx context.Context, j core.Job, fin core.Finish) []core.OutboxMessage {
	if fin.To == core.JobWaitingApproval && fin.Approval != nil && j.ParentJobID != 0 {
		// A subtask says nothing itself, but its call waits for a person:
		// the parent's thread asks.
		home, err := s.approvalHome(ctx, j.TaskID)
		if err != nil || home.Thread.Platform == core.PlatformSubtask {
			s.log.Warn("the thread of a subtask's approval was not found; it waits for its timeout", "job", j.ID, "err", err)
			return nil
		}
		msg := s.approvalMsgs(j, *fin.Approval)[0]
		msg.TaskID, msg.JobID = home.ID, j.ID
		return []core.OutboxMessage{msg}
	}
	task, ok := s.speaks(ctx, j)
	if !ok {
		return nil
	}
	id := strconv.FormatInt(j.ID, 10)
	answer := ""
	if fin.To == core.JobSucceeded {
		answer = fin.ResultSummary
	}
	final, live := s.finalProgress(ctx, task, j, answer)
	switch fin.To {
	case core.JobSucceeded:
		msgs := []core.OutboxMessage{postMsg(fin.ResultSummary)}
		if live {
			msgs[0] = final // the answer closes the progress message
		}
		msgs = append(msgs, s.uploads(task, j)...)
		msgs = append(msgs, unreact(j.TriggerMsgID, EmojiClaimed), react(j.TriggerMsgID, EmojiDone), statusMsg(s.say("done", "job", id)))
		return compact(j, msgs...)
	case core.JobWaitingHuman:
		return compact(j, final, postMsg(fin.Question), statusMsg(s.say("asking")))
	case core.JobWaitingApproval:
		if fin.Approval == nil {
			return nil
		}
		return compact(j, append([]core.OutboxMessage{final}, s.approvalMsgs(j, *fin.Approval)...)...)
	case core.JobWaitingSubtasks:
		var list strings.Builder
		for _, c := range fin.Children {
			t, err := s.store.Task(ctx, c.TaskID)
			if err == nil {
				list.WriteString("\n  • " + t.Title)
			}
		}
		return compact(j, final, statusMsg(s.say("waiting_children", "n", strconv.Itoa(len(fin.Children)), "children", list.String())))
	case core.JobFailed:
		reason := fin.Error
		if reason == "" {
			reason = fin.ResultSummary
		}
		// Only the error's first line is for people; what follows (a
		// panic's stack trace) stays in the job's error field and the log.
		reason, _, _ = strings.Cut(reason, "\n")
		text := s.say("failed", "job", id, "reason", reason)
		failed := core.OutboxMessage{Kind: core.OutboxPost, Payload: Payload{Text: text, Buttons: []Button{
			{Action: actionRetry + ":" + id, Label: s.say("button_retry"), Style: StylePrimary},
		}}.Encode()}
		return compact(j, final, failed, unreact(j.TriggerMsgID, EmojiClaimed), react(j.TriggerMsgID, EmojiFailed), statusMsg(text))
	case core.JobAborted:
		who := "someone"
		if cur, err := s.store.Job(ctx, j.ID); err == nil && cur.AbortedBy != "" {
			who = mentionID(cur.AbortedBy)
		}
		text := s.say("aborted", "job", id, "who", who)
		return compact(j, final, postMsg(text), unreact(j.TriggerMsgID, EmojiClaimed), react(j.TriggerMsgID, EmojiFailed), statusMsg(text))
	}
	return nil
}

// OutputFile is a file a job left in its workspace's output/.
type OutputFile struct {
	Rel  string // relative to the workspace, slash-separated: "output/report.md"
	Path string // absolute
	Size int64  // bytes
}

// OutputFiles lists, in lexical order, the regular files under output/ of
// the workspace at dir modified at or after since (the zero time: all),
// at most limit of them (0: no limit). It never follows a symlink, output/
// itself included: a link to a host file is not a file the job wrote. A
// workspace that does not exist has none (fs.ErrNotExist is not an error).
func OutputFiles(dir string, since time.Time, limit int) ([]OutputFile, error) {
	ws, err := workspace.OpenExisting(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list output/ of %s: %w", dir, err)
	}
	defer ws.Close()
	var files []OutputFile
	err = ws.Walk(workspace.Output, func(p string, d fs.DirEntry, err error) error {
		if p != workspace.Output && !strings.HasPrefix(p, workspace.Output+"/") {
			return fs.SkipAll // output/ is a link to another folder
		}
		if limit > 0 && len(files) >= limit {
			return fs.SkipAll
		}
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || (!since.IsZero() && info.ModTime().Before(since)) {
			return nil
		}
		files = append(files, OutputFile{Rel: p, Path: filepath.Join(dir, filepath.FromSlash(p)), Size: info.Size()})
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return files, fmt.Errorf("list output/ of %s: %w", dir, err)
	}
	return files, nil
}

// uploads lists the files the job wrote to output/ since it started
// (OutputFiles). A file over MaxFileBytes (files.max_bytes) is not
// uploaded; one post after the uploads names each such file, its size and
// the limit, so that the thread knows where it is. The deliverer checks
// the size again when it sends, for a file that grew meanwhile.
func (s *Service) uploads(task core.Task, j core.Job) []core.OutboxMessage {
	files, err := OutputFiles(task.Workspace, j.StartedAt, maxUploads)
	if err != nil {
		s.log.Warn("listing output/ failed", "task", task.ID, "err", err)
	}
	var msgs []core.OutboxMessage
	var tooLarge []string
	for _, f := range files {
		if limit := s.cfg.MaxFileBytes; limit > 0 && f.Size > limit {
			s.log.Info("an output file is over the upload limit", "task", task.ID, "job", j.ID, "file", f.Rel, "bytes", f.Size, "limit", limit)
			tooLarge = append(tooLarge, UploadTooLarge(s.cfg.Locale, f.Rel, f.Size, limit))
			continue
		}
		msgs = append(msgs, core.OutboxMessage{Kind: core.OutboxUpload, Payload: Payload{
			Path: f.Path, Name: path.Base(f.Rel), Text: f.Rel,
		}.Encode()})
	}
	if len(tooLarge) > 0 {
		msgs = append(msgs, postMsg(strings.Join(tooLarge, "\n")))
	}
	return msgs
}

// Finished implements worker.Notifier: a message that arrived while the job
// ran and that the job never saw starts a follow-up job.
func (s *Service) Finished(ctx context.Context, j core.Job, fin core.Finish) {
	defer s.cfg.Kick()
	s.mu.Lock()
	delete(s.statusAt, j.ID) // a job claimed again starts afresh
	s.mu.Unlock()
	if fin.SeenCommentID == 0 || (j.State != core.JobSucceeded && j.State != core.JobFailed) {
		return
	}
	task, ok := s.speaks(ctx, j)
	if !ok {
		return
	}
	recent, err := s.store.RecentComments(ctx, task.ID, 20)
	if err != nil {
		s.log.Warn("reading comments for a follow-up failed", "task", task.ID, "err", err)
		return
	}
	var unseen *core.Comment
	for i := range recent {
		c := &recent[i]
		if c.ID > fin.SeenCommentID && c.Role == core.RoleUser && !strings.HasPrefix(c.Text, "!") {
			unseen = c
		}
	}
	if unseen == nil {
		return
	}
	if _, err := s.store.ActiveJob(ctx, task.ID); !errors.Is(err, core.ErrNotFound) {
		return // something else already runs
	}
	if _, err := s.dispatch.Create(ctx, core.Job{TaskID: task.ID, Piece: j.Piece, Instruction: unseen.Text, TriggerMsgID: unseen.PlatformMsgID}); err != nil {
		s.log.Error("starting a follow-up job failed", "task", task.ID, "err", err)
	}
}

// statusEvery is the least time between two edits of a job's status.
const statusEvery = 2 * time.Second

// maxStatusJobs bounds the jobs whose last status write the service
// remembers: a guard for jobs whose end it is never told (Finished forgets
// each job's), past which it forgets them all.
const maxStatusJobs = 10_000

// statusWritten records that job id's status was written at at. s.mu must
// be held.
func (s *Service) statusWritten(id int64, at time.Time) {
	if len(s.statusAt) >= maxStatusJobs {
		clear(s.statusAt)
	}
	s.statusAt[id] = at
}

var _ engine.Observer = (*Service)(nil)

// Observe implements engine.Observer: the job's status message shows its
// progress, edited at most every statusEvery.
func (s *Service) Observe(ctx context.Context, st engine.Status) {
	now := s.cfg.Now()
	s.mu.Lock()
	if last, ok := s.statusAt[st.JobID]; ok && now.Sub(last) < statusEvery {
		s.mu.Unlock()
		return
	}
	s.statusWritten(st.JobID, now)
	s.mu.Unlock()
	j := core.Job{ID: st.JobID, TaskID: st.TaskID}
	task, ok := s.speaks(ctx, j)
	if !ok || s.streaming(task.Thread.Platform) {
		return // the progress message shows it (Progress)
	}
	elapsed := "-"
	if !st.Started.IsZero() {
		elapsed = now.Sub(st.Started).Round(time.Second).String()
	}
	level := ""
	if st.Level != "" {
		level = " context: " + st.Level + "."
	}
	if st.Compactions > 0 {
		level += s.say("compacted_note", "n", strconv.Itoa(st.Compactions))
	}
	level += s.cachedNote(st.CachedTokens, st.PromptTokens)
	text := s.say("progress", "piece", st.Piece, "movement", s.movementText(st.Piece, st.Movement, st.MovementCount),
		"iteration", strconv.Itoa(st.Iteration),
		"tokens", strconv.FormatInt(st.Tokens, 10), "elapsed", elapsed, "level", level)
	if err := s.store.AddOutbox(ctx, compact(j, s.runningMsg(j.ID, text))...); err != nil {
		s.log.Warn("writing a status update failed", "job", st.JobID, "err", err)
		return
	}
	s.cfg.Kick()
}

var _ engine.Questioner = (*Service)(nil)

// Question implements engine.Questioner: text is posted in the task's
// thread, and the reply comes back as a message in it.
func (s *Service) Question(ctx context.Context, taskID int64, text string) error {
	if err := s.store.AddOutbox(ctx, core.OutboxMessage{TaskID: taskID, Kind: core.OutboxPost, Payload: Payload{Text: text}.Encode()}); err != nil {
		return fmt.Errorf("post a question in task %d: %w", taskID, err)
	}
	s.cfg.Kick()
	return nil
}

var _ engine.Notifier = (*Service)(nil)

// Notice implements engine.Notifier: text is posted in the task's thread.
func (s *Service) Notice(ctx context.Context, taskID int64, text string) error {
	if err := s.store.AddOutbox(ctx, core.OutboxMessage{TaskID: taskID, Kind: core.OutboxPost, Payload: Payload{Text: text}.Encode()}); err != nil {
		return fmt.Errorf("post a notice in task %d: %w", taskID, err)
	}
	s.cfg.Kick()
	return nil
}

// cachedNote says which share of the prompt tokens the provider served
// from its prompt cache; "" when it reported none cached.
func (s *Service) cachedNote(cached, prompt int64) string {
	if cached <= 0 || prompt <= 0 {
		return ""
	}
	return s.say("cached_note", "pct", strconv.FormatInt(cached*100/prompt, 10))
}

// usageTotals adds up, over a job's usage events (every attempt's), the
// prompt tokens the provider served from its cache and those it reported.
func usageTotals(evs []core.JobEvent) (cached, prompt int64) {
	for _, e := range evs {
		if e.Kind != "usage" || !strings.Contains(e.Detail, "reported=true") {
			continue
		}
		var p, c, cached64 int64
		if _, err := fmt.Sscanf(e.Detail, "prompt=%d completion=%d cached=%d", &p, &c, &cached64); err == nil {
			prompt += p
			cached += cached64
		}
	}
	return cached, prompt
}
