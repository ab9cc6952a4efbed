package chat

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
)

// runCommand runs an in-thread `!` command. Answers meant for the thread
// (status, help) are posted there; refusals come back as the Reply.
func (s *Service) runCommand(ctx context.Context, task core.Task, m Message, keys []string, text string) (Reply, error) {
	name, args, _ := command(text)
	r, err := s.command(ctx, Command{Name: name, Args: args, Thread: m.Thread, InThread: task.ID != 0, Direct: m.Direct, Channel: m.Channel, Author: m.Author}, task)
	if err != nil {
		return Reply{}, err
	}
	// Recorded once the command ran: a redelivery of a command that failed
	// runs it again; one of a command that ran finds its keys.
	if first, err := s.seen(ctx, keys); err != nil || !first {
		return Reply{}, err
	}
	return s.publish(ctx, task, r), nil
}

// publish posts a reply meant for the thread (Public) in task's thread
// and returns what is left for the author alone.
func (s *Service) publish(ctx context.Context, task core.Task, r Reply) Reply {
	if !r.Public || task.ID == 0 {
		return r
	}
	s.post(ctx, task.ID, 0, r.Text)
	return Reply{}
}

// HandleCommand runs a slash command. Inside a task's thread the task is
// implicit; elsewhere Args may name one ("#42"). The Reply is for the
// caller alone.
func (s *Service) HandleCommand(ctx context.Context, c Command) (Reply, error) {
	if !s.allowed(c.Author, c.Channel) {
		return Reply{Text: s.say("not_allowed")}, nil
	}
	var task core.Task
	if c.InThread {
		t, err := s.store.TaskByThread(ctx, c.Thread)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return Reply{}, err
		}
		task = t
	}
	r, err := s.command(ctx, c, task)
	r.Public = false
	return r, err
}

// command runs c in task (zero when there is none).
func (s *Service) command(ctx context.Context, c Command, task core.Task) (Reply, error) {
	if ref, ok := taskRef(c.Args); ok && c.Name != "piece" && c.Name != "approve" && c.Name != "deny" && c.Name != "policy" {
		t, err := s.store.Task(ctx, ref)
		if errors.Is(err, core.ErrNotFound) {
			return Reply{Text: s.say("task_not_found", "task", "#"+strconv.FormatInt(ref, 10))}, nil
		}
		if err != nil {
			return Reply{}, err
		}
		task = t
	}
	switch c.Name {
	case "help":
		return Reply{Text: s.help(), Public: true}, nil
	case "status":
		if task.ID == 0 {
			return Reply{Text: s.say("no_task")}, nil
		}
		text, err := s.status(ctx, task)
		return Reply{Text: text, Public: true}, err
	case "abort", "stop", "cancel":
		return s.abort(ctx, task, c.Author)
	case "retry":
		return s.retry(ctx, task, c.Author)
	case "rerun":
		return s.rerunCommand(ctx, task, c.Author, c.Args)
	case "approve", "deny":
		v := core.VerdictApprove
		if c.Name == "deny" {
			v = core.VerdictDeny
		}
		return s.approveCommand(ctx, task, v, c.Author, c.Args)
	case "policy":
		return s.policyCommand(ctx, c)
	case "list":
		return s.list(ctx, c.Author)
	case "mcp":
		return Reply{Text: s.mcpServers(c.Channel)}, nil
	case "usage":
		return s.usage(ctx, c)
	case "new":
		if !c.Direct {
			return Reply{Text: s.say("new_only_dm")}, nil
		}
		if task.ID != 0 {
			if err := s.store.RetireThread(ctx, task.ID); err != nil {
				return Reply{}, err
			}
		}
		return Reply{Text: s.say("new_task")}, nil
	default:
		return Reply{Text: s.say("unknown_command", "name", c.Name) + "\n\n" + s.help()}, nil
	}
}

// mcpServers describes the MCP servers the jobs of channel may use.
func (s *Service) mcpServers(channel string) string {
	var servers []MCPServer
	if s.cfg.MCP != nil {
		servers = s.cfg.MCP.ForChannel(channel)
	}
	if len(servers) == 0 {
		return s.say("mcp_none")
	}
	lines := []string{s.say("mcp_header")}
	for _, srv := range servers {
		pieces := s.say("mcp_all_pieces")
		if len(srv.Pieces) > 0 {
			pieces = s.say("mcp_pieces", "pieces", strings.Join(srv.Pieces, ", "))
		}
		tools := s.say("mcp_not_listed")
		if srv.Listed {
			tools = s.say("mcp_tools", "n", strconv.Itoa(srv.Tools))
		}
		lines = append(lines, s.say("mcp_line", "server", srv.Name, "pieces", pieces, "tools", tools))
	}
	return strings.Join(lines, "\n")
}

func (s *Service) help() string {
	var names []string
	if s.cfg.Pieces != nil {
		names = s.cfg.Pieces.Names()
	}
	return s.say("help", "pieces", strings.Join(names, ", "))
}

// taskRef parses "#42" or "42".
func taskRef(args string) (int64, bool) {
	f := strings.Fields(args)
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(f[0], "#"), 10, 64)
	return n, err == nil && n > 0
}

// abort stops the task's active job (and its subtasks), as c.Author asks.
func (s *Service) abort(ctx context.Context, task core.Task, who Author) (Reply, error) {
	if task.ID == 0 {
		return Reply{Text: s.say("no_task")}, nil
	}
	j, err := s.store.ActiveJob(ctx, task.ID)
	if errors.Is(err, core.ErrNotFound) {
		return Reply{Text: s.say("no_active_job")}, nil
	}
	if err != nil {
		return Reply{}, err
	}
	if !s.mayAbort(task, who) {
		return Reply{Text: s.say("not_allowed_abort")}, nil
	}
	waited := j
	j, err = s.dispatch.Abort(ctx, j.ID, who.ID)
	if err != nil {
		return Reply{}, err
	}
	if j.State == core.JobAborted {
		// It was not running: no worker will announce it.
		var more []core.OutboxMessage
		if waited.State == core.JobWaitingApproval {
			more = append(more, s.approvalAborted(ctx, waited, who))
		}
		s.postJob(ctx, j, s.say("aborted", "job", strconv.FormatInt(j.ID, 10), "who", mention(who)),
			append(more, react(j.TriggerMsgID, EmojiFailed), statusMsg(s.say("aborted", "job", strconv.FormatInt(j.ID, 10), "who", mention(who))))...)
	}
	return Reply{Text: s.say("abort_requested", "job", strconv.FormatInt(j.ID, 10), "who", mention(who))}, nil
}

// retry starts a new job where the task's last failed or aborted job
// stopped: at its movement, with its lessons and a fresh budget.
func (s *Service) retry(ctx context.Context, task core.Task, who Author) (Reply, error) {
	if task.ID == 0 {
		return Reply{Text: s.say("no_task")}, nil
	}
	if !s.mayAbort(task, who) {
		return Reply{Text: s.say("not_allowed_abort")}, nil
	}
	if j, err := s.store.ActiveJob(ctx, task.ID); err == nil {
		return Reply{Text: s.say("busy", "job", strconv.FormatInt(j.ID, 10), "state", string(j.State))}, nil
	}
	jobs, err := s.store.Jobs(ctx, core.JobFilter{TaskID: task.ID, Limit: 1})
	if err != nil {
		return Reply{}, err
	}
	if len(jobs) == 0 || (jobs[0].State != core.JobFailed && jobs[0].State != core.JobAborted) {
		return Reply{Text: s.say("retry_nothing")}, nil
	}
	old := jobs[0]
	j, err := s.dispatch.Create(ctx, core.Job{
		TaskID: task.ID, RetryOf: old.ID, Piece: old.Piece, Instruction: old.Instruction,
		Movement: old.Movement, Lessons: old.Lessons, TriggerMsgID: old.TriggerMsgID,
	})
	switch {
	case err != nil && j.ID == 0:
		return Reply{}, err
	case err != nil: // stored, not queued: it waits for the queue, as a new request does
		s.log.Warn("the job waits in the store until the queue answers", "job", j.ID, "task", task.ID, "err", err)
	}
	return Reply{Text: s.say("retry_started", "old", strconv.FormatInt(old.ID, 10), "job", strconv.FormatInt(j.ID, 10), "movement", old.Movement), Public: true}, nil
}

// list shows the caller's active tasks (an admin's: everyone's).
func (s *Service) list(ctx context.Context, who Author) (Reply, error) {
	jobs, err := s.store.Jobs(ctx, core.JobFilter{States: []core.JobState{core.JobQueued, core.JobRunning, core.JobWaitingHuman, core.JobWaitingSubtasks, core.JobWaitingApproval}, Limit: 200})
	if err != nil {
		return Reply{}, err
	}
	var lines []string
	for _, j := range jobs {
		if j.ParentJobID != 0 {
			continue
		}
		t, err := s.store.Task(ctx, j.TaskID)
		if err != nil {
			return Reply{}, err
		}
		if t.OwnerUser != who.ID && !s.isAdmin(who) {
			continue
		}
		lines = append(lines, fmt.Sprintf("• #%d %s — job #%d %s (%s)", t.ID, t.Title, j.ID, j.State, j.Piece))
	}
	if len(lines) == 0 {
		return Reply{Text: s.say("list_none")}, nil
	}
	return Reply{Text: strings.Join(lines, "\n")}, nil
}

// status describes the task's latest job.
func (s *Service) status(ctx context.Context, task core.Task) (string, error) {
	jobs, err := s.store.Jobs(ctx, core.JobFilter{TaskID: task.ID, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(jobs) == 0 {
		return s.say("status_none", "task", "#"+strconv.FormatInt(task.ID, 10)), nil
	}
	j := jobs[0]
	return s.statusLine(ctx, task, j)
}

func (s *Service) statusLine(ctx context.Context, task core.Task, j core.Job) (string, error) {
	elapsed := "-"
	if !j.StartedAt.IsZero() {
		end := s.cfg.Now()
		if !j.FinishedAt.IsZero() {
			end = j.FinishedAt
		}
		elapsed = end.Sub(j.StartedAt).Round(time.Second).String()
	}
	level := ""
	evs, err := s.store.Events(ctx, j.ID)
	if err != nil {
		return "", err
	}
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "context_") {
			level = " " + e.Detail + "."
		}
	}
	level += s.egressStatus(evs)
	level += s.cachedNote(usageTotals(evs))
	var children string
	kids, err := s.store.Jobs(ctx, core.JobFilter{ParentJobID: j.ID})
	if err != nil {
		return "", err
	}
	for i := len(kids) - 1; i >= 0; i-- {
		k := kids[i]
		t, err := s.store.Task(ctx, k.TaskID)
		if err != nil {
			return "", err
		}
		children += fmt.Sprintf("\n  • %s — %s", t.Title, k.State)
	}
	// MovementCount counts the movements run to their end; one running,
	// or parked at a call waiting for approval, is started too.
	started := j.MovementCount
	if j.State == core.JobRunning || j.State == core.JobWaitingApproval {
		started++
	}
	if j.State == core.JobWaitingApproval {
		if a, err := s.store.Approval(ctx, j.ID, j.WaitSeq); err == nil {
			level += " " + s.say("status_approval", "tool", a.Tool, "subject", "`"+strings.ReplaceAll(clipLine(a.Subject, 200), "`", "'")+"`")
		}
	}
	if j.State == core.JobQueued {
		if p, ok := s.dispatch.Queue.(interface {
			Position(ctx context.Context, jobID int64) (int, error)
		}); ok {
			if n, err := p.Position(ctx, j.ID); err == nil && n > 0 {
				level += " " + s.say("queue_position", "n", strconv.Itoa(n))
			}
		}
	}
	return s.say("status", "state_icon", stateIcon(j.State), "task", "#"+strconv.FormatInt(task.ID, 10),
		"job", strconv.FormatInt(j.ID, 10), "state", string(j.State), "piece", j.Piece, "movement", s.movementText(j.Piece, j.Movement, started),
		"iteration", strconv.Itoa(j.Iteration),
		"tokens", strconv.FormatInt(j.PromptTokens+j.CompletionTokens, 10), "elapsed", elapsed,
		"level", level, "children", children), nil
}

// maxStatusHosts caps the hosts !status lists of a job's connections.
const maxStatusHosts = 8

// egressStatus sums up the job's connections through the egress proxy
// (its core.EventEgress events): how many of each outcome, then each host
// and port with each outcome, how many times and the bytes up and down,
// in the order first seen; "" when it made none.
func (s *Service) egressStatus(evs []core.JobEvent) string {
	type group struct {
		host, outcome string
		n             int
		up, down      int64
	}
	counts := map[string]int{}
	var groups []*group
	index := map[[2]string]*group{}
	var n int
	for _, e := range evs {
		if e.Kind != core.EventEgress {
			continue
		}
		c, ok := core.ParseConnection(e.Detail)
		if !ok {
			continue
		}
		n++
		counts[c.Outcome]++
		key := [2]string{c.HostPort(), c.Outcome}
		g := index[key]
		if g == nil {
			g = &group{host: c.HostPort(), outcome: c.Outcome}
			index[key] = g
			groups = append(groups, g)
		}
		g.n++
		g.up += c.BytesUp
		g.down += c.BytesDown
	}
	if n == 0 {
		return ""
	}
	var hosts []string
	for i, g := range groups {
		if i == maxStatusHosts {
			hosts = append(hosts, s.say("status_egress_more", "n", strconv.Itoa(len(groups)-i)))
			break
		}
		host := "`" + strings.ReplaceAll(clipLine(orDash(g.host), 100), "`", "'") + "`"
		hosts = append(hosts, s.say("status_egress_host", "host", host, "outcome", s.outcomeWord(g.outcome), "n", strconv.Itoa(g.n),
			"up", strconv.FormatInt(g.up, 10), "down", strconv.FormatInt(g.down, 10)))
	}
	return " " + s.say("status_egress", "n", strconv.Itoa(n), "allowed", strconv.Itoa(counts["allowed"]),
		"denied", strconv.Itoa(counts["denied"]), "asked", strconv.Itoa(counts["asked"]), "hosts", strings.Join(hosts, "; "))
}

// outcomeWord is a connection's outcome as people read it.
func (s *Service) outcomeWord(outcome string) string {
	switch outcome {
	case "allowed":
		return s.say("status_egress_allowed")
	case "denied":
		return s.say("status_egress_denied")
	}
	return s.say("status_egress_asked")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stateIcon(s core.JobState) string {
	switch s {
	case core.JobSucceeded:
		return "✅"
	case core.JobFailed, core.JobAborted:
		return "❌"
	case core.JobWaitingHuman:
		return "❓"
	case core.JobWaitingApproval:
		return "🔐"
	default:
		return "⏳"
	}
}

// mention names a person in a post.
func mention(a Author) string {
	if a.Name != "" {
		return a.Name
	}
	return mentionID(a.ID)
}

// mentionID names the person with a platform-qualified id in a post: a
// mention where the platform has them, else the bare name.
func mentionID(id string) string {
	platform, user, ok := strings.Cut(id, ":")
	switch {
	case !ok:
		return id
	case platform == string(core.PlatformSlack) || platform == string(core.PlatformDiscord):
		return "<@" + user + ">"
	default:
		return user
	}
}

// HandleReaction aborts the task's active job when a person reacts with ❌
// on the task's root message or on the message that started the job. A
// direct-message channel is one thread whose key is no message, so there
// the request carrying 👀 is the one to react to.
func (s *Service) HandleReaction(ctx context.Context, r Reaction) (Reply, error) {
	if r.Author.Bot || r.Emoji != EmojiFailed || r.MsgID == "" {
		return Reply{}, nil
	}
	task, err := s.store.TaskByThread(ctx, r.Thread)
	if errors.Is(err, core.ErrNotFound) {
		return Reply{}, nil
	}
	if err != nil {
		return Reply{}, err
	}
	j, err := s.store.ActiveJob(ctx, task.ID)
	if errors.Is(err, core.ErrNotFound) {
		return Reply{}, nil
	}
	if err != nil {
		return Reply{}, err
	}
	if r.MsgID != r.Thread.Thread && r.MsgID != j.TriggerMsgID {
		return Reply{}, nil
	}
	return s.abort(ctx, task, r.Author)
}

// clipLine is the first line of s, cut to n runes.
func clipLine(s string, n int) string {
	line, _, more := strings.Cut(s, "\n")
	r := []rune(line)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}
