package slack

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/slack-go/slack"
)

// refusalMemory is how long a workspace that refused streaming messages
// is not asked again.
const refusalMemory = time.Hour

// refusedStreaming are the Web API errors saying the workspace does not
// let the app stream messages (the method unknown, a scope missing, the
// feature off).
var refusedStreaming = map[string]bool{
	"unknown_method":         true,
	"missing_scope":          true,
	"not_allowed":            true,
	"not_allowed_token_type": true,
	"method_deprecated":      true,
	"feature_not_enabled":    true,
	"team_not_allowed":       true,
}

// goneStream are the errors saying the stream message no longer takes
// appends (deleted, or already stopped).
var goneStream = map[string]bool{
	"message_not_found":              true,
	"message_not_in_streaming_state": true,
	"cant_update_message":            true,
	"invalid_ts":                     true,
}

// streams is what a Poster sent to each of its streaming messages, so
// that an append carries only what changed.
type streams struct {
	mu sync.Mutex
	// sent holds, per message ts, the state of each plan and task chunk
	// id and the answer bytes sent; guarded by mu.
	sent map[string]*sent
	// refused holds, per workspace, until when streaming is not tried;
	// guarded by mu.
	refused map[string]time.Time
	// status holds, per assistant thread (channel and thread ts), the
	// status last set there, or noStatus where Slack refused one;
	// guarded by mu.
	status map[string]string
	now    func() time.Time
}

// noStatus marks a thread whose status Slack refused to set (not an
// assistant thread, or a workspace without the method): not asked again.
const noStatus = "\x00"

type sent struct {
	steps map[string]string // chunk id → state sent
	plan  int               // the plan position sent
	text  int               // bytes of the view's text sent
}

func (s *streams) clock() time.Time {
	if s.now == nil {
		return time.Now()
	}
	return s.now()
}

// isRefused reports whether team refused streaming within the last
// refusalMemory.
func (s *streams) isRefused(team string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.refused[team]
	return ok && s.clock().Before(until)
}

func (s *streams) refuse(team string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		s.refused = map[string]time.Time{}
	}
	s.refused[team] = s.clock().Add(refusalMemory)
}

// chunks are the chunks showing v in message ts: all of them for a new
// message (ts ""), else those that changed since what was sent. The
// returned function records them as sent under the message's ts.
func (s *streams) chunks(ts string, v chat.ProgressView) ([]slack.StreamChunk, func(ts string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.sent[ts]
	switch {
	case ts == "":
		old = &sent{steps: map[string]string{}}
	case old == nil:
		// A stream this process did not start, or forgot (a gateway
		// restarted mid-job): its text is taken as sent, since
		// appending it again would show it twice (the answer comes
		// whole at the end anyway); plan and task chunks are sent again,
		// as each replaces the card of its id.
		old = &sent{steps: map[string]string{}, plan: max(v.Current-1, 0), text: len(v.Text)}
	}
	next := &sent{steps: map[string]string{}, plan: old.plan, text: old.text}
	for k, st := range old.steps {
		next.steps[k] = st
	}
	var out []slack.StreamChunk
	// A plan update for each movement begun since the last call, even
	// those that began and ended in between: the thread sees every one.
	for pos := old.plan + 1; pos <= v.Current && pos <= len(v.Plan); pos++ {
		out = append(out, slack.NewPlanUpdateChunk(planTitle(v, pos)))
		next.plan = pos
	}
	if ts == "" && v.Current == 0 {
		out = append(out, slack.NewPlanUpdateChunk(v.Piece))
	}
	add := func(step chat.ProgressStep) {
		if next.steps[step.ID] == step.State {
			return
		}
		c := slack.NewTaskUpdateChunk(step.ID, step.Title)
		c.Status = slack.TaskCardStatus(step.State)
		out = append(out, c)
		next.steps[step.ID] = step.State
	}
	for _, step := range v.Plan {
		if step.State != chat.StepPending || ts == "" {
			add(step)
		}
	}
	for _, step := range v.Tools {
		add(step)
	}
	if len(v.Text) > next.text {
		out = append(out, slack.NewMarkdownTextChunk(render(v.Text[next.text:])))
		next.text = len(v.Text)
	}
	return out, func(ts string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.sent == nil {
			s.sent = map[string]*sent{}
		}
		if v.Final {
			delete(s.sent, ts)
			return
		}
		if len(s.sent) > 4096 {
			clear(s.sent) // forgotten streams get their cards again
		}
		s.sent[ts] = next
	}
}

// planTitle is the plan_update title of v at movement position pos (from
// 1): the movement and its place in the piece.
func planTitle(v chat.ProgressView, pos int) string {
	return fmt.Sprintf("%s: %s (%s/%s)", v.Piece, v.Plan[pos-1].Title, strconv.Itoa(pos), strconv.Itoa(len(v.Plan)))
}

var _ chat.ProgressPoster = (*Poster)(nil)

// Progress implements chat.ProgressPoster with Slack's streaming
// messages: chat.startStream for a new message, chat.appendStream with
// the plan_update, task_update and markdown_text chunks that changed, and
// chat.stopStream with the final view, answer as its last text. A
// workspace that refuses the methods gets chat.ErrNoProgress, and is not
// asked again for an hour.
func (p *Poster) Progress(ctx context.Context, thread core.ThreadRef, msgID string, v chat.ProgressView, answer string) (string, bool, error) {
	p.threadStatus(ctx, thread, chat.ProgressStatus(p.locale, v))
	if p.streams.isRefused(thread.Team) {
		return "", false, fmt.Errorf("slack workspace %s: %w", thread.Team, chat.ErrNoProgress)
	}
	chunks, sentAs := p.streams.chunks(msgID, v)
	if v.Final && answer != "" {
		chunks = append(chunks, slack.NewMarkdownTextChunk(render(answer)))
	}
	var opts []slack.MsgOption
	if len(chunks) > 0 {
		opts = append(opts, slack.MsgOptionChunks(chunks...))
	}
	var err error
	method := ""
	switch {
	case msgID == "":
		method = "chat.startStream"
		o := []slack.MsgOption{slack.MsgOptionTS(thread.Thread), slack.MsgOptionTaskDisplayMode(slack.TaskDisplayModePlan)}
		if thread.Team != "" {
			o = append(o, slack.MsgOptionRecipientTeamID(thread.Team))
		}
		if user, ok := strings.CutPrefix(v.Owner, "slack:"); ok && user != "" {
			o = append(o, slack.MsgOptionRecipientUserID(user))
		}
		_, msgID, err = p.api.StartStreamContext(ctx, thread.Channel, append(o, opts...)...)
		if err == nil && v.Final {
			method = "chat.stopStream"
			_, _, err = p.api.StopStreamContext(ctx, thread.Channel, msgID)
		}
	case v.Final:
		method = "chat.stopStream"
		_, _, err = p.api.StopStreamContext(ctx, thread.Channel, msgID, opts...)
	case len(chunks) == 0:
		return msgID, false, nil
	default:
		method = "chat.appendStream"
		_, _, err = p.api.AppendStreamContext(ctx, thread.Channel, msgID, opts...)
	}
	if err != nil {
		code := slackError(err)
		switch {
		case refusedStreaming[code] || (method == "chat.startStream" && code != "" && !goneStream[code]):
			// A stream Slack will not start, whatever the reason it
			// names, is a refusal: the status message shows the job.
			p.streams.refuse(thread.Team)
			return "", false, fmt.Errorf("%s: %s: %w", method, code, chat.ErrNoProgress)
		case goneStream[code]:
			return "", false, fmt.Errorf("%s: %s: %w", method, code, chat.ErrProgressGone)
		}
		return "", false, classify(method, err)
	}
	sentAs(msgID)
	return msgID, v.Final && answer != "", nil
}

// threadStatus shows status beside an assistant thread (a thread of a
// direct message with the app) with assistant.threads.setStatus: "is
// running Read core/job.go…" while the job works, cleared ("") when it
// ends. Only a change is sent. It is best effort: a thread where Slack
// refuses it is not asked again, and the job's progress goes on either
// way.
func (p *Poster) threadStatus(ctx context.Context, thread core.ThreadRef, status string) {
	if !strings.HasPrefix(thread.Channel, "D") || thread.Thread == "" || thread.Thread == thread.Channel {
		return
	}
	key := thread.Channel + "/" + thread.Thread
	s := &p.streams
	s.mu.Lock()
	last, seen := s.status[key]
	if s.status == nil || len(s.status) > 10_000 {
		s.status = map[string]string{} // forget now and then
	}
	if last == noStatus || (seen && last == status) || (!seen && status == "") {
		s.mu.Unlock()
		return
	}
	s.status[key] = status
	if status == "" {
		delete(s.status, key) // the job ended: nothing to remember
	}
	s.mu.Unlock()
	err := p.api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
		ChannelID: thread.Channel, ThreadTS: thread.Thread, Status: status})
	if err != nil && slackError(err) != "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.status[key] = noStatus
	}
}
