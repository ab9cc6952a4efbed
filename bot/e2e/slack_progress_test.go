package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/llmtest"
)

// streamMethods are the Web API methods of a streaming message.
var streamMethods = []string{"chat.startStream", "chat.appendStream", "chat.stopStream"}

// newSlackProgressWorld is a Slack world whose jobs show their progress
// live, at most one update a second per thread.
func newSlackProgressWorld(t *testing.T) *slackWorld {
	t.Helper()
	return newSlackWorldWith(t, stackOptions{Progress: map[core.Platform]chat.ProgressSettings{
		core.PlatformSlack: {Stream: true, Interval: time.Second},
	}})
}

// progressScript is a plan-implement-verify job: plan reads a file and
// runs a command, implement runs a burst of burst commands, verify
// completes with answer.
func progressScript(burst int, answer string) []llmtest.Step {
	var calls []llmtest.Step
	for i := range burst {
		calls = append(calls, llmtest.Call("Bash", fmt.Sprintf(`{"command":"echo %d"}`, i)))
	}
	return []llmtest.Step{
		llmtest.Calls(llmtest.Call("Read", `{"path":"missing.txt"}`), llmtest.Call("Glob", `{"pattern":"*"}`)),
		llmtest.Transition("implement", "planned"),
		llmtest.Calls(calls...),
		llmtest.Transition("verify", "built"),
		llmtest.Transition("COMPLETE", answer),
	}
}

// TestSlackProgressStreams: a job of three movements with tool calls is one
// streaming message: one chat.startStream, appends whose plan updates name
// each movement in order and whose task updates follow the tool calls in
// order, each call ending complete or error, and the answer in
// chat.stopStream, never posted besides. Under a burst of 50 tool calls
// the thread gets at most one streaming call a second.
func TestSlackProgressStreams(t *testing.T) {
	w := newSlackProgressWorld(t)
	const burst = 50
	w.sys.LLM.Script(progressScript(burst, "All **done**.")...)
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> !piece plan-implement-verify build it", root, ""), "")
	w.waitJob(root, core.JobSucceeded)
	eventually(t, "chat.stopStream", func() bool { return len(w.slack.Recorded("chat.stopStream")) > 0 })

	calls := w.slack.Recorded(streamMethods...)
	if n := len(w.slack.Recorded("chat.startStream")); n != 1 {
		t.Fatalf("%d chat.startStream calls, want one: %+v", n, calls)
	}
	if calls[0].User != "U1" {
		t.Errorf("the stream is for %q, want the requester U1", calls[0].User)
	}
	if calls[0].Method != "chat.startStream" || calls[0].ThreadTS != root || calls[0].Channel != "C1" {
		t.Errorf("first streaming call %s in %s thread %q, want chat.startStream in C1 thread %s", calls[0].Method, calls[0].Channel, calls[0].ThreadTS, root)
	}
	last := calls[len(calls)-1]
	if last.Method != "chat.stopStream" || len(w.slack.Recorded("chat.stopStream")) != 1 {
		t.Errorf("calls end with %s, want the one chat.stopStream", last.Method)
	}
	for _, c := range calls[1:] {
		if c.TS != calls[0].Posted {
			t.Errorf("%s on %q, want the stream %s", c.Method, c.TS, calls[0].Posted)
		}
	}

	// At most one call a second in the thread: each call at least a
	// second after the one before it (the pacer's lower bound).
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].At.Sub(calls[i-1].At); gap < time.Second {
			t.Errorf("%s %s after %s: want at least 1s between two streaming calls", calls[i].Method, gap, calls[i-1].Method)
		}
	}
	if len(calls) >= burst/2 {
		t.Errorf("%d streaming calls for %d tool calls: the updates are not coalesced", len(calls), burst+2)
	}

	var plans, taskOrder, titles []string
	final := map[string]string{}
	answer := ""
	for _, c := range calls {
		for _, ch := range c.StreamChunks() {
			switch ch.Type {
			case "plan_update":
				plans = append(plans, ch.Title)
			case "task_update":
				if strings.HasPrefix(ch.ID, "tool:") && !slices.Contains(taskOrder, ch.ID) {
					taskOrder = append(taskOrder, ch.ID)
					titles = append(titles, ch.Title)
				}
				final[ch.ID] = ch.Status
			case "markdown_text":
				if c.Method == "chat.stopStream" {
					answer += ch.Text
				}
			}
		}
	}
	var movements []string
	for _, p := range plans {
		for _, m := range []string{"plan (1/3)", "implement (2/3)", "verify (3/3)"} {
			if strings.Contains(p, m) && !slices.Contains(movements, m) {
				movements = append(movements, m)
			}
		}
	}
	if !slices.Equal(movements, []string{"plan (1/3)", "implement (2/3)", "verify (3/3)"}) {
		t.Errorf("plan updates %q, want each movement in order", plans)
	}
	if len(taskOrder) != burst+2 {
		t.Fatalf("%d tool task updates, want %d: %q", len(taskOrder), burst+2, taskOrder)
	}
	want := []string{"Read missing.txt", "Glob: *"}
	for i := range burst {
		want = append(want, fmt.Sprintf("Bash: echo %d", i))
	}
	if !slices.Equal(titles, want) {
		t.Errorf("tool task titles %q, want the calls in order %q", titles, want)
	}
	for _, m := range []string{"movement:plan", "movement:implement", "movement:verify"} {
		if final[m] != "complete" {
			t.Errorf("movement task %s ends %q, want complete", m, final[m])
		}
	}
	for _, id := range taskOrder {
		if st := final[id]; st != "complete" && st != "error" {
			t.Errorf("tool task %s ends %q, want complete or error", id, st)
		}
	}
	if final["tool:call_1"] != "error" {
		t.Errorf("the Read of a missing file ends %q, want error", final["tool:call_1"])
	}
	if !strings.Contains(answer, "All *done*.") {
		t.Errorf("chat.stopStream text %q, want the answer", answer)
	}
	for _, c := range w.slack.Recorded("chat.postMessage", "chat.update") {
		if strings.Contains(c.Text, "All *done*.") {
			t.Errorf("the answer was also sent by %s: %q", c.Method, c.Text)
		}
	}
	eventually(t, "✅ on the mention", func() bool { return w.reacted(root, "white_check_mark") })
}

// TestSlackProgressRefused: a workspace that refuses streaming messages
// gets the status message edited with the job's progress instead, and
// the answer exactly once; the refusal is remembered, so that the next
// job does not ask again.
func TestSlackProgressRefused(t *testing.T) {
	w := newSlackProgressWorld(t)
	w.slack.Fail("chat.startStream", "unknown_method")
	w.sys.LLM.Script(progressScript(3, "Refused but **answered**.")...)
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> !piece plan-implement-verify build it", root, ""), "")
	w.waitJob(root, core.JobSucceeded)
	answered := func() int {
		n := 0
		for _, c := range w.slack.Recorded("chat.postMessage") {
			if strings.Contains(c.Text, "Refused but *answered*.") {
				n++
			}
		}
		return n
	}
	eventually(t, "the answer", func() bool { return answered() > 0 })
	eventually(t, "✅ on the mention", func() bool { return w.reacted(root, "white_check_mark") })
	if n := answered(); n != 1 {
		t.Errorf("the answer was posted %d times, want once", n)
	}
	edited := false
	for _, c := range w.slack.Recorded("chat.update") {
		if strings.Contains(c.Text, "Bash: echo") || strings.Contains(c.Text, "movement") {
			edited = true
		}
	}
	if !edited {
		t.Errorf("no status edit showed the progress: %+v", w.slack.Recorded("chat.update"))
	}
	if n := len(w.slack.Recorded(streamMethods...)); n != 0 {
		t.Errorf("%d streaming calls went through a refusing workspace", n)
	}
}

// TestSlackProgressStreamDeleted: a person deletes the streaming message
// mid-job; Baton starts another and ends the job there, answer included.
func TestSlackProgressStreamDeleted(t *testing.T) {
	w := newSlackProgressWorld(t)
	script := progressScript(2, "Answer after the **deletion**.")
	script[1] = script[1].After(1500 * time.Millisecond) // time to delete the stream
	w.sys.LLM.Script(script...)
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> !piece plan-implement-verify build it", root, ""), "")
	eventually(t, "chat.startStream", func() bool { return len(w.slack.Recorded("chat.startStream")) > 0 })
	first := w.slack.Recorded("chat.startStream")[0].Posted
	w.slack.DeleteMessage(first)
	w.waitJob(root, core.JobSucceeded)
	eventually(t, "chat.stopStream", func() bool { return len(w.slack.Recorded("chat.stopStream")) > 0 })

	starts := w.slack.Recorded("chat.startStream")
	if len(starts) != 2 {
		t.Fatalf("%d chat.startStream calls, want the first and one after the deletion", len(starts))
	}
	stops := w.slack.Recorded("chat.stopStream")
	if len(stops) != 1 || stops[0].TS != starts[1].Posted {
		t.Fatalf("chat.stopStream calls %+v, want one, on the second stream %s", stops, starts[1].Posted)
	}
	answer := ""
	for _, ch := range stops[0].StreamChunks() {
		answer += ch.Text
	}
	if !strings.Contains(answer, "Answer after the *deletion*.") {
		t.Errorf("chat.stopStream text %q, want the answer", answer)
	}
}

// TestSlackProgressRateLimited: Slack answers 429 to the appends; Baton
// waits as told, the views that piled up meanwhile coalesce, and the
// answer still ends the stream, once.
func TestSlackProgressRateLimited(t *testing.T) {
	w := newSlackProgressWorld(t)
	w.slack.SetRetryAfter(2)
	w.slack.RateLimit("chat.appendStream", 1)
	w.slack.RateLimit("chat.stopStream", 1)
	script := progressScript(20, "Answer despite the **limit**.")
	script[2] = script[2].After(1200 * time.Millisecond) // a view between the start and the stop
	w.sys.LLM.Script(script...)
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> !piece plan-implement-verify build it", root, ""), "")
	w.waitJob(root, core.JobSucceeded)
	eventually(t, "chat.stopStream", func() bool { return len(w.slack.Recorded("chat.stopStream")) > 0 })
	stops := w.slack.Recorded("chat.stopStream")
	answer := ""
	for _, ch := range stops[0].StreamChunks() {
		answer += ch.Text
	}
	if n := w.slack.RateLimited(); n != 2 {
		t.Errorf("%d calls answered 429, want the 2 planned", n)
	}
	if len(stops) != 1 || !strings.Contains(answer, "Answer despite the *limit*.") {
		t.Errorf("chat.stopStream calls %d, text %q: want one, with the answer", len(stops), answer)
	}
	for _, c := range w.slack.Recorded("chat.postMessage") {
		if strings.Contains(c.Text, "Answer despite") {
			t.Errorf("the answer was posted besides the stream")
		}
	}
}
