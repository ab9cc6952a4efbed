package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/egress"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/policy"
	"github.com/baton-bot/baton/core/tools"
)

// The egress proxy in the agent loop. A job run has one session of the
// proxy; its Bash commands connect through it. A host the configuration
// asks about is decided as a tool call is: the gate first (a configured
// approvals rule naming EgressTool, a stored "always allow" of the
// channel), then a person. The durable wait parks the
// job, and a parked job holds no process: a connection cannot stay open
// across it. So the connection is refused at once (the client is told to
// retry once approved), the call's result says that a person was asked,
// and at the end of the turn the job parks in waiting_approval on an
// approval of tool EgressTool for host:port. Approved, the host is allowed
// for the rest of the job and the model is told to run its command again;
// denied, it stays refused and the model is told so. The job's approvals
// in the store are the record of those decisions: every run of the job
// takes them up (recallEgress), so that a decision holds after a
// question, subtasks or a new attempt as after the park it was taken in.
// Every connection is a job event of kind core.EventEgress.

// EgressTool is the tool name of the approvals and "always allow" rules
// of egress connections; their subject is host:port.
const EgressTool = "egress"

// maxEgressEvents caps the egress events of one job run: a client that
// opens a thousand connections does not write a thousand rows.
const maxEgressEvents = 200

// egressRun is a job run's use of the proxy.
type egressRun struct {
	pr      *pieceRun
	ctx     context.Context // the run's, for the events the audit writes
	channel string          // where the job's acts are judged (pieceRun.channel)
	session *egress.Session

	mu       sync.Mutex
	approved []string          // guarded by mu: host:port people approved for this job
	denied   []string          // guarded by mu: host:port people denied
	asked    []string          // guarded by mu: host:port asked about since the turn began, first first
	private  map[string]string // guarded by mu: of those, the ones leading to a non-public address, to that address
	events   int               // guarded by mu: egress events written
}

// egressTools returns the job's egress for tools.Env: nil (no proxy) unless
// the engine has one; the session starts with the first call that needs it.
func (pr *pieceRun) egressTools(ctx context.Context) tools.Egress {
	if pr.e.cfg.Egress == nil {
		return nil
	}
	er := pr.egressState()
	er.mu.Lock()
	started := er.session != nil
	er.mu.Unlock()
	var approved, denied []string
	if !started {
		approved, denied = pr.recallEgress(ctx)
	}
	er.mu.Lock()
	defer er.mu.Unlock()
	if er.session == nil {
		for _, hp := range approved {
			addOnce(&er.approved, hp)
		}
		for _, hp := range denied {
			addOnce(&er.denied, hp)
		}
		// Ask and audit run in the proxy's goroutines: what they need of
		// the run is taken here, in the run's.
		er.ctx, er.channel = context.WithoutCancel(ctx), pr.channel(ctx)
		er.session = pr.e.cfg.Egress.Session(egress.SessionConfig{
			Job:   egress.Job{ID: pr.job.ID, Channel: er.channel, Piece: pr.piece.Name},
			Asker: er, Audit: er.audit,
		})
	}
	return er.session
}

// recallEgress returns the hosts people approved and denied earlier in
// the job: its decided approvals of EgressTool, one per wait so far. A
// store that cannot be read forgets them (they are asked again).
func (pr *pieceRun) recallEgress(ctx context.Context) (approved, denied []string) {
	for seq := int64(1); seq <= pr.job.WaitSeq; seq++ {
		a, err := pr.e.store.Approval(ctx, pr.job.ID, seq)
		if errors.Is(err, core.ErrNotFound) {
			continue // a question or subtasks
		}
		if err != nil {
			pr.log.Warn("the job's earlier egress decisions could not be read; they will be asked again", "err", err)
			return nil, nil
		}
		switch {
		case a.Tool != EgressTool || a.State == core.ApprovalPending:
		case a.Approved():
			approved = append(approved, a.Subject)
		default:
			denied = append(denied, a.Subject)
		}
	}
	return approved, denied
}

// addOnce appends s to *list unless it holds it.
func addOnce(list *[]string, s string) {
	if !slices.Contains(*list, s) {
		*list = append(*list, s)
	}
}

// egressState returns the run's egress state, made on first use.
func (pr *pieceRun) egressState() *egressRun {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.egress == nil {
		pr.egress = &egressRun{pr: pr}
	}
	return pr.egress
}

// closeEgress ends the run's session, if it began.
func (pr *pieceRun) closeEgress() {
	pr.mu.Lock()
	er := pr.egress
	pr.mu.Unlock()
	if er == nil {
		return
	}
	er.mu.Lock()
	s := er.session
	er.mu.Unlock()
	if s != nil {
		s.Close()
	}
}

// Ask implements egress.Asker: a host people decided on for this job is
// answered so; the gate's rules (a stored "always allow" for the channel,
// a configured rule naming EgressTool) are consulted next; anything else
// is asked of a person, at the end of the turn.
func (er *egressRun) Ask(ctx context.Context, q egress.Question) (egress.Answer, error) {
	hp := q.HostPort()
	er.mu.Lock()
	switch {
	case slices.Contains(er.approved, hp):
		er.mu.Unlock()
		return egress.Answer{Outcome: egress.Allowed, Rule: er.pr.e.text.msg("egress_rule_approved")}, nil
	case slices.Contains(er.denied, hp):
		er.mu.Unlock()
		return egress.Answer{Outcome: egress.Denied, Rule: er.pr.e.text.msg("egress_rule_denied"),
			Reason: er.pr.e.text.fill("egress_refused_for_job", map[string]string{"host": hp})}, nil
	}
	channel := er.channel
	er.mu.Unlock()
	pr := er.pr
	if gate := pr.e.cfg.Gate; gate != nil {
		d, err := gate.Decide(ctx, policy.Request{
			Kind: policy.External, Tool: EgressTool, Subject: hp,
			Channel: channel, Piece: pr.piece.Name, Requester: pr.task.OwnerUser,
		})
		switch {
		case err != nil:
			pr.log.Warn("the approvals policy could not decide on a connection; asking", "host", hp, "err", err)
		case d.Action == policy.Allow:
			return egress.Answer{Outcome: egress.Allowed, Rule: d.Rule}, nil
		case d.Action == policy.Deny:
			return egress.Answer{Outcome: egress.Denied, Rule: d.Rule}, nil
		}
	}
	er.mu.Lock()
	defer er.mu.Unlock()
	if !slices.Contains(er.asked, hp) {
		er.asked = append(er.asked, hp)
	}
	for _, ip := range q.Addrs {
		if egress.Special(ip) && ip.String() != q.Host {
			if er.private == nil {
				er.private = map[string]string{}
			}
			er.private[hp] = ip.String()
		}
	}
	return egress.Answer{Outcome: egress.Asked}, nil
}

// audit records one connection as a job event, up to maxEgressEvents.
func (er *egressRun) audit(r egress.Record) {
	pr := er.pr
	er.mu.Lock()
	er.events++
	n, ctx := er.events, er.ctx
	er.mu.Unlock()
	pr.mu.Lock()
	mv := pr.movement
	pr.mu.Unlock()
	switch {
	case n < maxEgressEvents:
		_ = pr.event(ctx, core.EventEgress, mv, egressDetail(r))
	case n == maxEgressEvents:
		_ = pr.event(ctx, core.EventEgress, mv, egressDetail(r)+fmt.Sprintf("; the job's further connections are not recorded as events (%d so far)", n))
	}
}

// egressDetail is how an egress event reads (core.Connection): the
// outcome first, as !status counts them.
func egressDetail(r egress.Record) string {
	return core.Connection{
		Outcome: r.Outcome, Method: r.Method, Host: r.Host, Port: r.Port, Rule: r.Rule, Addr: r.Addr,
		BytesUp: r.BytesUp, BytesDown: r.BytesDown, Duration: r.Duration, Reason: clipRunes(r.Reason, 300),
	}.String()
}

// egressNote is what the result of a call that led to questions says of
// them, or "" (and the turn's questions are kept for the park).
func (pr *pieceRun) egressNote(asked []string) string {
	if len(asked) == 0 {
		return ""
	}
	return pr.e.text.fill("egress_asked", map[string]string{"host": strings.Join(asked, ", ")})
}

// egressPrivate returns the non-public address host:port was found to
// lead to when it was asked about, or "".
func (pr *pieceRun) egressPrivate(hp string) string {
	er := pr.egressState()
	er.mu.Lock()
	defer er.mu.Unlock()
	return er.private[hp]
}

// egressAsked returns the hosts asked about since the turn began.
func (pr *pieceRun) egressAsked() []string {
	pr.mu.Lock()
	er := pr.egress
	pr.mu.Unlock()
	if er == nil {
		return nil
	}
	er.mu.Lock()
	defer er.mu.Unlock()
	return slices.Clone(er.asked)
}

// egressTurn begins a turn: questions of an earlier one are forgotten.
func (pr *pieceRun) egressTurn() {
	pr.mu.Lock()
	er := pr.egress
	pr.mu.Unlock()
	if er == nil {
		return
	}
	er.mu.Lock()
	defer er.mu.Unlock()
	er.asked, er.private = nil, nil
}

// parkForEgress ends a turn whose calls asked about a host: the movement
// parks on the approval of the first one. ok is false when nothing was
// asked.
func (m *movement) parkForEgress(ctx context.Context) (outcome, bool, error) {
	pr, e := m.pr, m.pr.e
	asked := pr.egressAsked()
	if len(asked) == 0 {
		return outcome{}, false, nil
	}
	host := asked[0]
	private := pr.egressPrivate(host)
	pr.egressTurn()
	cp := m.checkpointAt(nil)
	cp.Egress = host
	data, err := json.Marshal(cp)
	if err != nil {
		return outcome{}, false, fmt.Errorf("checkpoint of movement %s: %w", m.mv.Name, err)
	}
	args, _ := json.Marshal(map[string]string{"host": host})
	preview := e.text.fill("egress_preview", map[string]string{"host": host})
	if private != "" {
		preview += " " + e.text.fill("egress_preview_private", map[string]string{"addr": private})
	}
	if cmd := m.lastCommand(); cmd != "" {
		preview += "\n" + "Bash: " + clipRunes(cmd, 500)
	}
	now := e.cfg.Now()
	a := core.Approval{
		Tool: EgressTool, Arguments: string(args), Subject: host, Preview: visible(preview),
		Channel: pr.channel(ctx), Requester: pr.task.OwnerUser, Rule: "egress.default",
		CreatedAt: now, Deadline: now.Add(e.cfg.ApprovalTimeout),
	}
	return outcome{Next: waitApproval, park: &park{approval: a, checkpoint: string(data)}}, true, nil
}

// lastCommand is the command of the turn's last Bash call, for the
// approval's preview.
func (m *movement) lastCommand() string {
	for i := len(m.msgs) - 1; i >= 0; i-- {
		for _, c := range slices.Backward(m.msgs[i].ToolCalls) {
			if c.Name == "Bash" {
				return policy.Subject(c.Name, c.Arguments)
			}
		}
		if m.msgs[i].Role == llm.RoleAssistant {
			return ""
		}
	}
	return ""
}

// resumeEgress takes the decision on the host the movement parked for
// and tells the model, then runs the movement on.
func (pr *pieceRun) resumeEgress(ctx context.Context, m *movement, host string, a core.Approval) (outcome, error) {
	e := pr.e
	er := pr.egressState()
	var text string
	er.mu.Lock()
	switch {
	case a.Approved():
		addOnce(&er.approved, host)
		text = e.text.fill("egress_approved", map[string]string{"host": host, "who": a.DecidedBy})
	case a.DecidedBy == core.DecidedByTimeout:
		addOnce(&er.denied, host)
		text = e.text.fill("egress_timed_out", map[string]string{"host": host, "timeout": e.cfg.ApprovalTimeout.String()})
	default:
		addOnce(&er.denied, host)
		vars := map[string]string{"host": host, "who": a.DecidedBy, "reason": ""}
		if r := strings.TrimSpace(a.Reason); r != "" {
			vars["reason"] = e.text.fill("approval_reason", map[string]string{"reason": clipRunes(r, 300)})
		}
		text = e.text.fill("egress_denied", vars)
	}
	er.mu.Unlock()
	m.add(llm.Message{Role: llm.RoleUser, Content: text})
	return m.loop(ctx)
}
