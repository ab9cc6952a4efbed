package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/core/workspace"
)

// Pieces are the pieces people may pick with `!piece`. *piece.Library
// implements it.
type Pieces interface {
	Names() []string
	Lookup(name string) (*piece.Piece, bool)
}

// Access is who may use Baton and how (the access: configuration). Ids are
// platform-qualified ("slack:U1", "discord-role:7", …).
type Access struct {
	Admins          []string
	AllowedUsers    []string // empty: everyone
	AllowedChannels []string // empty: every channel
	AbortBy         string   // owner_and_admins | anyone
	AnswerBy        string   // participants | owner
	// Approvers may decide approvals besides the task's requester and the
	// admins: platform-qualified user ids or groups, as AllowedUsers.
	Approvers []string
}

// MCPServer is an MCP server a channel's jobs may use, for `/baton mcp`.
type MCPServer struct {
	Name   string
	Pieces []string // the pieces it is bound to; empty: every piece
	// Tools is how many tools of it jobs are offered, when a job has
	// listed them (Listed).
	Tools  int
	Listed bool
}

// MCPServers tells which MCP servers a channel's jobs may use.
type MCPServers interface {
	// ForChannel returns the servers bound to the platform-qualified
	// channel, in the configuration's order.
	ForChannel(channel string) []MCPServer
}

// Config configures a Service.
type Config struct {
	DefaultPiece string
	Pieces       Pieces
	// MCP answers `/baton mcp` and `!mcp`; nil: no server is configured.
	MCP    MCPServers
	Access Access
	Locale string
	// MaxTextBytes caps a stored message (100,000 bytes by default); a
	// longer one is cut, with a note.
	MaxTextBytes int
	// MaxFileBytes caps an attachment (files.max_bytes).
	MaxFileBytes int64
	// Models are the model aliases a re-run may name (llm.models: alias →
	// model); when set, a re-run's model must be one of them, by alias or
	// by the model it stands for. Empty: any model name.
	Models map[string]string
	// Kick, when set, is called after the outbox was written, to wake the
	// deliverers.
	Kick func()
	// Progress is each platform's live progress (progress.stream,
	// progress.interval); a platform not in it keeps the edited status
	// message alone.
	Progress map[core.Platform]ProgressSettings
	Now      func() time.Time
	Logger   *slog.Logger
	// Tracer starts a trace for each message; a job the message creates
	// carries it to the worker (core.EventTrace). nil: no tracing.
	Tracer core.Tracer
}

// Service is the conversation service. It is safe for concurrent use.
type Service struct {
	store    core.Store
	dispatch worker.Dispatch
	cfg      Config
	log      *slog.Logger

	mu       sync.Mutex
	statusAt map[int64]time.Time    // guarded by mu: when each job's status was last written
	progress map[int64]*progressJob // guarded by mu: the live progress of each job
}

// NewService returns the conversation service over store and queue.
func NewService(store core.Store, q core.Queue, cfg Config) *Service {
	if cfg.MaxTextBytes <= 0 {
		cfg.MaxTextBytes = 100_000
	}
	if cfg.Locale == "" {
		cfg.Locale = "en"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Kick == nil {
		cfg.Kick = func() {}
	}
	return &Service{store: store, dispatch: worker.Dispatch{Store: store, Queue: q}, cfg: cfg, log: cfg.Logger, statusAt: map[int64]time.Time{}}
}

func (s *Service) say(key string, pairs ...string) string { return say(s.cfg.Locale, key, pairs...) }

// HandleMessage takes one message of a thread: it stores it as a comment
// (once, however often it is delivered) and then answers a waiting
// question, steers the running job, or starts a new job. `!` commands are
// run instead of stored. The Reply, when not empty, is for the author
// alone (a refusal, a command's answer).
//
// A message's dedup keys, its thread's task, its comment and the job it
// starts are written in one transaction (core.InboundStore.Ingest), so a
// message is either taken whole or not at all and a redelivery finds it
// taken. A message with attachments saves its files in the task's
// workspace first and then ingests the rest; when that write fails (or a
// concurrent delivery won), the files it saved are removed again, so a
// redelivery finds nothing half-taken. A `!` command runs first and records
// its keys after: a command that failed, or whose keys could not be
// recorded, runs again when the message is delivered again.
func (s *Service) HandleMessage(ctx context.Context, m Message) (Reply, error) {
	ctx, span := s.messageSpan(ctx, m)
	defer span.End()
	keys := inboundKeys(m)
	text := s.clean(m.Text)
	onlyStickers := text == "" && len(m.Files) == 0 && len(m.Stickers) > 0
	text = s.withStickers(text, m.Stickers)
	task, err := s.store.TaskByThread(ctx, m.Thread)
	found := err == nil
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return Reply{}, err
	}
	if !found && !m.Addressed {
		return Reply{}, nil // a thread Baton is not part of
	}
	if !s.allowed(m.Author, m.Channel) {
		return s.once(ctx, keys, Reply{Text: s.say("not_allowed")})
	}
	if name, _, ok := command(text); ok && name != "piece" {
		if known, err := s.store.InboundKnown(ctx, keys); err != nil || known {
			return Reply{}, err
		}
		return s.runCommand(ctx, task, m, keys, text) // task is zero in a new thread
	}
	if found {
		active, err := s.store.ActiveJob(ctx, task.ID)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return Reply{}, err
		}
		if err == nil && active.State == core.JobWaitingHuman && active.WaitKind != "" {
			// The engine's question (a budget, a loop guard): only a
			// well-formed `continue` from those who may decide answers it.
			if r, refused := s.refuseContinue(task, m.Author, text); refused {
				return s.once(ctx, keys, r)
			}
		} else if err == nil && active.State == core.JobWaitingHuman && !s.mayAnswer(task, m.Author) {
			return s.once(ctx, keys, Reply{Text: s.say("not_allowed_answer")})
		}
	}
	job, refusal := s.newJob(m, text)
	if found && onlyStickers {
		job = nil // a reaction in sticker form, not a request
	}
	in := core.Inbound{
		Keys: keys, At: s.cfg.Now(),
		Task: core.Task{Thread: m.Thread, OwnerUser: m.Author.ID, Title: chattext.Title(text, 80)},
		Comment: core.Comment{
			PlatformMsgID: m.MsgID, AuthorID: m.Author.ID, AuthorName: m.Author.Name,
			Role: core.RoleUser, Text: text, Original: s.original(m.Original), CreatedAt: s.at(m),
		},
		Job: job,
	}
	switch {
	case len(m.Files) > 0:
		if known, err := s.store.InboundKnown(ctx, keys); err != nil || known {
			return Reply{}, err
		}
		if !found {
			if task, err = s.openTask(ctx, m, text); err != nil {
				return Reply{}, err
			}
		}
		in.Comment.Files = s.saveFiles(ctx, task, m)
	case !found && m.History != nil:
		in.History = s.history(ctx, m)
	}
	res, err := s.store.Ingest(ctx, in)
	if err != nil || res.Duplicate {
		s.removeFiles(task, in.Comment.Files)
		return Reply{}, err
	}
	switch {
	case res.Job.ID != 0:
		// The job is committed with the message: a queue that does not
		// answer (Redis down) delays it, and the message is not refused
		// for that. It waits in the store for the reconciler, or for the
		// dispatch when the queue answers again.
		s.traceJob(ctx, res.Job)
		if err := s.dispatch.Enqueue(ctx, res.Job.ID); err != nil {
			s.log.Warn("the job waits in the store until the queue answers", "job", res.Job.ID, "task", res.Task.ID, "err", err)
		}
	case res.Active.State == core.JobWaitingHuman:
		// The answer: the asking movement starts again with it among the
		// last comments. A second reply finds the job resumed already and
		// stays a comment.
		if res.Active.WaitKind != "" {
			if r, refused := s.refuseContinue(res.Task, m.Author, text); refused || !core.IsContinue(text) {
				return r, nil // a comment that answers nothing, or it began to wait after the check above
			}
		} else if !s.mayAnswer(res.Task, m.Author) {
			return Reply{}, nil // it began to wait after the check above
		}
		if _, err := s.dispatch.Resume(ctx, res.Active.ID, res.Active.WaitSeq); err != nil {
			return Reply{}, err
		}
	case res.Active.ID == 0:
		return refusal, nil // a `!piece` that named no piece, or no text
	}
	// Otherwise running: the engine hands the comment to the agent before
	// its next request. Queued or waiting for subtasks: it is among the
	// last comments when the job runs.
	return Reply{}, nil
}

// inboundKeys are a message's dedup keys. Platforms deliver one message
// under several events (Slack's app_mention and message): the message id
// is the sure key.
func inboundKeys(m Message) []string {
	platform := string(m.Thread.Platform)
	var keys []string
	if m.EventID != "" {
		keys = append(keys, "event:"+platform+":"+m.EventID)
	}
	if m.MsgID != "" {
		keys = append(keys, "msg:"+platform+":"+m.Thread.Channel+":"+m.MsgID)
	}
	return keys
}

// seen records keys and reports whether the message is new: false when one
// of them was seen before.
func (s *Service) seen(ctx context.Context, keys []string) (bool, error) {
	for _, k := range keys {
		first, err := s.store.SeenInbound(ctx, k, s.cfg.Now())
		if err != nil || !first {
			return false, err
		}
	}
	return true, nil
}

// once returns r for a message seen for the first time, and nothing for a
// redelivery.
func (s *Service) once(ctx context.Context, keys []string, r Reply) (Reply, error) {
	if first, err := s.seen(ctx, keys); err != nil || !first {
		return Reply{}, err
	}
	return r, nil
}

// newJob returns the job a message starts in a task with no active job,
// or nil and the author's answer when a `!piece` (or m.Piece) names no
// known piece or gives no text.
func (s *Service) newJob(m Message, text string) (*core.Job, Reply) {
	pieceName, instruction := s.cfg.DefaultPiece, text
	if instruction == "" {
		// Only a mention, or only files: say so rather than send nothing.
		instruction = s.say("empty_request")
	}
	p, rest, named := m.Piece, text, m.Piece != ""
	if name, args, ok := command(text); ok && name == "piece" && !named {
		p, rest, _ = strings.Cut(strings.TrimSpace(args), " ")
		named = true
	}
	if named {
		if !s.pieceExists(p) {
			return nil, Reply{Text: s.say("unknown_piece", "piece", p, "pieces", strings.Join(s.cfg.Pieces.Names(), ", "))}
		}
		if strings.TrimSpace(rest) == "" {
			return nil, Reply{Text: s.say("piece_needs_text", "piece", p)}
		}
		pieceName, instruction = p, strings.TrimSpace(rest)
	}
	return &core.Job{Piece: pieceName, Instruction: instruction, TriggerMsgID: m.MsgID}, Reply{}
}

// openTask creates the task of a thread the bot was addressed in, with the
// thread's earlier messages when the adapter can fetch them.
func (s *Service) openTask(ctx context.Context, m Message, text string) (core.Task, error) {
	task, created, err := s.store.EnsureTask(ctx, core.Task{Thread: m.Thread, OwnerUser: m.Author.ID, Title: chattext.Title(text, 80)})
	if err != nil || !created || m.History == nil {
		return task, err
	}
	for _, c := range s.history(ctx, m) {
		c.TaskID = task.ID
		_, err := s.store.AddComment(ctx, c)
		if err != nil && !errors.Is(err, core.ErrDuplicate) {
			return task, err
		}
	}
	return task, nil
}

// history fetches the thread's messages before m, as comments; nil when
// the adapter cannot fetch them (logged).
func (s *Service) history(ctx context.Context, m Message) []core.Comment {
	earlier, err := m.History(ctx)
	if err != nil {
		s.log.Warn("fetching the thread's earlier messages failed", "thread", m.Thread.Thread, "err", err)
		return nil
	}
	var out []core.Comment
	for _, h := range earlier {
		if h.MsgID == m.MsgID {
			continue
		}
		role := core.RoleUser
		if h.Author.Bot {
			role = core.RoleBot
		}
		out = append(out, core.Comment{PlatformMsgID: h.MsgID, AuthorID: h.Author.ID, AuthorName: h.Author.Name, Role: role,
			Text: s.withStickers(s.clean(h.Text), h.Stickers), Original: s.original(h.Original), CreatedAt: s.at(h)})
	}
	return out
}

// clean makes inbound text safe to store: valid UTF-8, no control
// characters but tab and newline, capped with a note.
func (s *Service) clean(text string) string {
	text, cut := chattext.Clean(text, s.cfg.MaxTextBytes)
	text = strings.TrimSpace(text)
	if cut {
		text += "\n\n" + s.say("too_long", "n", strconv.Itoa(s.cfg.MaxTextBytes))
	}
	return text
}

// original cleans a message's original text as clean does, without the
// note: it is kept for audit, not read.
func (s *Service) original(text string) string {
	text, _ = chattext.Clean(text, s.cfg.MaxTextBytes)
	return strings.TrimSpace(text)
}

// withStickers adds a line naming each sticker to text.
func (s *Service) withStickers(text string, stickers []string) string {
	for _, name := range stickers {
		name, _ = chattext.Clean(name, 200)
		text = strings.TrimSpace(text + "\n" + s.say("sticker", "name", strings.Join(strings.Fields(name), " ")))
	}
	return text
}

func (s *Service) at(m Message) time.Time {
	if m.At.IsZero() {
		return s.cfg.Now()
	}
	return m.At
}

// saveFiles downloads a message's attachments into the task's input/ and
// returns their workspace paths. A refused file is noted in the thread.
func (s *Service) saveFiles(ctx context.Context, task core.Task, m Message) []string {
	ws, err := workspace.Open(task.Workspace)
	if err != nil {
		s.log.Error("opening the workspace for attachments failed", "task", task.ID, "err", err)
	} else {
		defer ws.Close()
	}
	var paths []string
	for _, f := range m.Files {
		rel, err := "", errNoWorkspace
		if ws != nil {
			rel, err = s.saveFile(ctx, ws, f)
		}
		if err != nil {
			s.log.Warn("attachment refused", "task", task.ID, "file", f.Name, "err", err)
			s.post(ctx, task.ID, 0, s.say("file_refused", "name", f.Name, "reason", s.refusal(err)))
			continue
		}
		paths = append(paths, rel)
	}
	return paths
}

// removeFiles removes the attachments saved for a message that was not
// taken after all (its write failed, or another delivery of it won), so
// that its next delivery saves them under the same names. A failure is
// logged: the files stay, unlisted, in input/.
func (s *Service) removeFiles(task core.Task, paths []string) {
	if len(paths) == 0 {
		return
	}
	ws, err := workspace.Open(task.Workspace)
	if err != nil {
		s.log.Warn("attachments of a message not taken stay in the workspace", "task", task.ID, "files", len(paths), "err", err)
		return
	}
	defer ws.Close()
	for _, p := range paths {
		if err := ws.Remove(p); err != nil {
			s.log.Warn("attachment of a message not taken stays in the workspace", "task", task.ID, "file", p, "err", err)
		}
	}
}

var (
	errTooLarge    = errors.New("it is larger than the limit")
	errNoWorkspace = errors.New("the task's workspace cannot be opened")
)

// refusal is the reason a person reads for a refused attachment: the
// limit, or a plain sentence for what went wrong in the workspace (whose
// paths are Baton's business, not theirs).
func (s *Service) refusal(err error) string {
	switch {
	case errors.Is(err, errTooLarge):
		return err.Error()
	case errors.Is(err, workspace.ErrOutside), errors.Is(err, workspace.ErrNotRegular), errors.Is(err, workspace.ErrIsDir):
		return s.say("file_input_broken")
	case errors.Is(err, errNoWorkspace):
		return err.Error()
	}
	return s.say("file_not_saved")
}

// maxSameName bounds the numbered names tried for an attachment whose
// name is taken.
const maxSameName = 1000

// saveFile writes f into input/ under a name of its own: f's name made safe
// (workspace.SafeName), numbered when taken, never overwriting an earlier
// attachment and never leaving input/.
func (s *Service) saveFile(ctx context.Context, ws *workspace.Workspace, f File) (string, error) {
	if s.cfg.MaxFileBytes > 0 && f.Size > s.cfg.MaxFileBytes {
		return "", fmt.Errorf("%w of %d bytes", errTooLarge, s.cfg.MaxFileBytes)
	}
	name := workspace.SafeName(f.Name, "attachment")
	ext := path.Ext(name)
	rel := path.Join(workspace.Input, name)
	r, err := f.Open(ctx)
	if err != nil {
		return "", err
	}
	defer r.Close()
	var out *os.File
	for i := 2; ; i++ {
		if out, err = ws.CreateNew(rel); err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > maxSameName {
			return "", err
		}
		rel = path.Join(workspace.Input, fmt.Sprintf("%s-%d%s", strings.TrimSuffix(name, ext), i, ext))
	}
	limit := s.cfg.MaxFileBytes
	if limit <= 0 {
		limit = 1 << 62
	}
	n, err := io.Copy(out, io.LimitReader(r, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = fmt.Errorf("%w of %d bytes", errTooLarge, limit)
	}
	if err != nil {
		ws.Remove(rel)
		return "", err
	}
	return rel, nil
}

// post writes a message for a task's thread to the outbox.
func (s *Service) post(ctx context.Context, taskID, jobID int64, text string) {
	err := s.store.AddOutbox(ctx, core.OutboxMessage{TaskID: taskID, JobID: jobID, Kind: core.OutboxPost, Payload: Payload{Text: text}.Encode()})
	if err != nil {
		s.log.Error("writing to the outbox failed", "task", taskID, "err", err)
		return
	}
	s.cfg.Kick()
}

// allowed applies access.allowed_users and access.allowed_channels.
func (s *Service) allowed(a Author, channel string) bool {
	if s.isAdmin(a) {
		return true
	}
	if len(s.cfg.Access.AllowedChannels) > 0 && channel != "" && !slices.Contains(s.cfg.Access.AllowedChannels, channel) {
		return false
	}
	return len(s.cfg.Access.AllowedUsers) == 0 || matches(s.cfg.Access.AllowedUsers, a)
}

func (s *Service) isAdmin(a Author) bool { return matches(s.cfg.Access.Admins, a) }

// matches reports whether list names the author or one of their groups.
func matches(list []string, a Author) bool {
	if slices.Contains(list, a.ID) {
		return true
	}
	for _, g := range a.Groups {
		if slices.Contains(list, g) {
			return true
		}
	}
	return false
}

// mayAbort applies access.abort_by.
func (s *Service) mayAbort(task core.Task, a Author) bool {
	return s.cfg.Access.AbortBy == "anyone" || task.OwnerUser == a.ID || s.isAdmin(a)
}

// mayAnswer applies access.answer_by.
func (s *Service) mayAnswer(task core.Task, a Author) bool {
	return s.cfg.Access.AnswerBy != "owner" || task.OwnerUser == a.ID || s.isAdmin(a)
}

func (s *Service) pieceExists(name string) bool {
	return s.cfg.Pieces != nil && slices.Contains(s.cfg.Pieces.Names(), name)
}

// command splits a `!name args` message.
func command(text string) (name, args string, ok bool) {
	if !strings.HasPrefix(text, "!") {
		return "", "", false
	}
	line := strings.TrimPrefix(text, "!")
	name, args, _ = strings.Cut(line, " ")
	name, _, _ = strings.Cut(name, "\n")
	return strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(args), name != ""
}

// refuseContinue returns the refusal of text as the answer to an engine's
// question in task: a `continue` that is malformed or from someone who may
// not decide (the requester, admins and approvers may). A message that is
// no `continue` at all is kept as a comment and answers nothing; it is
// refused only in that it does not resume the job.
func (s *Service) refuseContinue(task core.Task, who Author, text string) (Reply, bool) {
	if !core.IsContinue(text) {
		return Reply{Text: s.say("continue_only")}, false
	}
	if _, _, ok := core.ParseContinue(text); !ok {
		return Reply{Text: s.say("continue_bad")}, true
	}
	if !s.mayDecide(task, who) {
		return Reply{Text: s.say("not_allowed_continue")}, true
	}
	return Reply{}, false
}

// messageSpan starts the span of message m, the root of the trace of
// what it asks; with tracing off it builds nothing.
func (s *Service) messageSpan(ctx context.Context, m Message) (context.Context, core.Span) {
	if s.cfg.Tracer == nil {
		return core.StartSpan(ctx, nil, "")
	}
	return s.cfg.Tracer.Start(ctx, "message.received", core.Attr{Key: "baton.platform", Value: string(m.Thread.Platform)})
}

// traceJob records the traceparent of ctx's span with job j, before it is
// enqueued, so that its attempts join the message's trace. A failure costs
// only that link.
func (s *Service) traceJob(ctx context.Context, j core.Job) {
	if s.cfg.Tracer == nil {
		return
	}
	tp := s.cfg.Tracer.TraceParent(ctx)
	if tp == "" {
		return
	}
	if err := s.store.AddEvent(ctx, core.JobEvent{JobID: j.ID, At: s.cfg.Now(), Kind: core.EventTrace, Detail: tp}); err != nil {
		s.log.Warn("the job's trace could not be recorded; its attempts start traces of their own", "job", j.ID, "err", err)
	}
}
