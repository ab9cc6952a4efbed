package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/outbox"
)

// liveHarness is a harness whose poster shows live progress
// (chat.ProgressPoster); refuse, when set, answers every Progress call.
type liveHarness struct {
	*harness
	live *livePoster
}

// livePoster records each Progress call as a "progress" call whose Text
// is "v<version>" ("final v<version> answer=<answer>" for the final one).
type livePoster struct {
	*poster
	refuse error
}

var _ chat.ProgressPoster = (*livePoster)(nil)

func (p *livePoster) Progress(ctx context.Context, thread core.ThreadRef, msgID string, v chat.ProgressView, answer string) (string, bool, error) {
	if p.refuse != nil {
		return "", false, p.refuse
	}
	text := fmt.Sprintf("v%d", v.Version)
	if v.Final {
		text = fmt.Sprintf("final v%d answer=%s", v.Version, answer)
	}
	id, err := p.do(call{Op: "progress", Channel: thread.Channel, Thread: thread.Thread, MsgID: msgID, Text: text}, "S")
	if msgID != "" && err == nil {
		id = msgID
	}
	return id, v.Final && answer != "", err
}

func newLiveHarness(t *testing.T, limits chat.Limits, fail func(call) error) *liveHarness {
	t.Helper()
	h := newHarness(t, limits, outbox.Config{}, fail)
	live := &livePoster{poster: h.poster}
	h.d = outbox.New(h.store, core.PlatformSlack, live, outbox.Config{Now: h.clock.Now, Backoff: func(int) time.Duration { return 0 }})
	return &liveHarness{harness: h, live: live}
}

// view stores a progress view of job j.
func (h *liveHarness) view(t *testing.T, task core.Task, j core.Job, v chat.ProgressView) {
	t.Helper()
	m := core.OutboxMessage{TaskID: task.ID, JobID: j.ID, Kind: core.OutboxUpdate, Ref: chat.ProgressRef(j.ID, 1), Payload: chat.Payload{Progress: &v}.Encode()}
	if err := h.store.AddOutbox(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// TestProgressFinalWins: a view written after the final one (a write
// under way when the job ended) is not shown; the answer closes the live
// message and is posted nowhere else.
func TestProgressFinalWins(t *testing.T) {
	h := newLiveHarness(t, chat.Limits{Post: 100}, nil)
	task := h.task(t, "C1")
	j := h.job(t, task)
	h.view(t, task, j, chat.ProgressView{JobID: j.ID, Version: 1})
	h.view(t, task, j, chat.ProgressView{JobID: j.ID, Version: 5, Final: true, Answer: "the answer"})
	h.view(t, task, j, chat.ProgressView{JobID: j.ID, Version: 4})
	h.rounds(t, 5, 0)
	got := texts(h.poster.Calls(true))
	want := []string{"progress:v1", "progress:final v5 answer=the answer"}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// TestProgressLongAnswerPostedOnce: an answer longer than one post closes
// the live message without it and is posted in parts, once, even when a
// part's post fails and is tried again.
func TestProgressLongAnswerPostedOnce(t *testing.T) {
	failed := false
	h := newLiveHarness(t, chat.Limits{Post: 20, MaxParts: 4}, func(c call) error {
		if c.Op == "post" && strings.HasPrefix(c.Text, "bbbb") && !failed {
			failed = true
			return errors.New("network down")
		}
		return nil
	})
	task := h.task(t, "C1")
	j := h.job(t, task)
	answer := strings.Repeat("a", 18) + "\n\n" + strings.Repeat("b", 18)
	h.view(t, task, j, chat.ProgressView{JobID: j.ID, Version: 2, Final: true, Answer: answer})
	h.rounds(t, 5, 0)
	got := texts(h.poster.Calls(true))
	want := []string{"progress:final v2 answer=", "post:" + strings.Repeat("a", 18), "post:" + strings.Repeat("b", 18)}
	if !failed {
		t.Fatal("the second part's post never failed")
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// TestProgressRefusedFallsBack: a platform refusing live messages gets the
// job's status message with the view as text, and the answer as a post,
// once.
func TestProgressRefusedFallsBack(t *testing.T) {
	h := newLiveHarness(t, chat.Limits{Post: 1000}, nil)
	h.live.refuse = fmt.Errorf("no: %w", chat.ErrNoProgress)
	task := h.task(t, "C1")
	j := h.job(t, task)
	h.view(t, task, j, chat.ProgressView{JobID: j.ID, Version: 1, Piece: "chat", Plan: []chat.ProgressStep{{Title: "work", State: chat.StepInProgress}}, Current: 1,
		Tools: []chat.ProgressStep{{ID: "tool:1", Title: "Bash: go test", State: chat.StepComplete}}})
	h.view(t, task, j, chat.ProgressView{JobID: j.ID, Version: 2, Final: true, Answer: "done it"})
	h.rounds(t, 5, 0)
	calls := h.poster.Calls(true)
	if len(calls) != 2 || calls[0].Op != "post" || !strings.Contains(calls[0].Text, "✓ Bash: go test") || calls[1].Text != "done it" {
		t.Errorf("calls %q, want the status message showing the view, then the answer", texts(calls))
	}
}
