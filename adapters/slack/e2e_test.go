package slack

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chat/chattest"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/outbox"
)

// world is the whole of Baton in-process behind an HTTP-mode Slack
// adapter, delivering to the fake Slack.
type world struct {
	t     testing.TB
	sys   *chattest.System
	slack *slackfake.Server
	base  string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	return newWorldWith(t, chattest.Options{})
}

func newWorldWith(t testing.TB, opts chattest.Options) *world {
	t.Helper()
	sys := chattest.Start(t, opts)
	return worldOver(t, sys, sys.Service, Config{Inbox: sys.Store})
}

// worldOver puts an HTTP-mode adapter configured by cfg, handing events to
// svc, in front of sys.
func worldOver(t testing.TB, sys *chattest.System, svc Service, cfg Config) *world {
	t.Helper()
	f := slackfake.NewServer(t)
	a, base := startHTTP(t, svc, f, cfg)
	d := outbox.New(sys.Store, core.PlatformSlack, a.Poster(), outbox.Config{Split: chattext.Split, Poll: 20 * time.Millisecond, MaxFileBytes: sys.MaxFileBytes})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &world{t: t, sys: sys, slack: f, base: base}
}

func (w *world) send(body, retry string) {
	w.t.Helper()
	r := slackfake.Sign(w.t, w.base, "/slack/events", body, time.Now(), "application/json")
	if retry != "" {
		r.Header.Set("X-Slack-Retry-Num", retry)
	}
	if status, b := do(w.t, r); status != 200 {
		w.t.Fatalf("event answered %d: %s", status, b)
	}
}

// jobs returns the jobs of the task of the thread under root, newest first.
func (w *world) jobs(root string) []core.Job {
	w.t.Helper()
	return w.jobsIn(thread(root))
}

func (w *world) waitJob(root string, s core.JobState) {
	w.t.Helper()
	eventually(w.t, "a job "+string(s), func() bool {
		jobs := w.jobs(root)
		return len(jobs) > 0 && jobs[0].State == s
	})
}

// reacted reports whether emoji was added to ts.
func (w *world) reacted(ts, emoji string) bool {
	for _, c := range w.slack.Recorded("reactions.add") {
		if c.TS == ts && c.Name == emoji {
			return true
		}
	}
	return false
}

func TestMentionAnsweredInThread(t *testing.T) {
	w := newWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "The answer is **42**. <!channel> @here"))
	const root = "1700000000.000100"
	mention := slackfake.MentionEvent("Ev1", "U1", "<@UBATON> what is the answer?", root, "")
	w.send(mention, "")
	w.send(slackfake.MessageEvent("Ev2", "U1", "<@UBATON> what is the answer?", root, ""), "")
	w.send(mention, "1")
	w.waitJob(root, core.JobSucceeded)
	eventually(t, "✅ on the mention", func() bool { return w.reacted(root, "white_check_mark") })

	if jobs := w.jobs(root); len(jobs) != 1 {
		t.Errorf("%d jobs, want one", len(jobs))
	}
	if n := len(w.sys.LLM.Requests()); n != 1 {
		t.Errorf("%d LLM requests, want one", n)
	}
	var eyes, answer, done = -1, -1, -1
	for i, c := range w.slack.Recorded() {
		switch {
		case c.Method == "reactions.add" && c.Name == "eyes" && c.TS == root:
			eyes = i
		case c.Method == "chat.postMessage" && strings.Contains(c.Text, "The answer is *42*."):
			answer = i
			if c.ThreadTS != root || c.Channel != "C1" {
				t.Errorf("answer posted in %s thread %q, want C1 thread %s", c.Channel, c.ThreadTS, root)
			}
			if strings.Contains(c.Text, "<!channel>") || strings.Contains(c.Text, " @here") {
				t.Errorf("answer pings: %q", c.Text)
			}
		case c.Method == "reactions.add" && c.Name == "white_check_mark" && c.TS == root:
			done = i
		}
	}
	if eyes < 0 || answer < 0 || done < 0 || !(eyes < answer && answer < done) {
		t.Errorf("👀 at %d, answer at %d, ✅ at %d: want all, in that order; calls: %+v", eyes, answer, done, w.slack.Recorded())
	}
}

func TestAskAnsweredInThread(t *testing.T) {
	w := newWorld(t)
	w.sys.LLM.Script(llmtest.Transition("ASK", "need a year", "question", "Which year?"))
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> make the report", root, ""), "")
	w.waitJob(root, core.JobWaitingHuman)
	eventually(t, "the question in the thread", func() bool {
		for _, c := range w.slack.Recorded("chat.postMessage") {
			if strings.Contains(c.Text, "Which year?") && c.ThreadTS == root {
				return true
			}
		}
		return false
	})

	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Report for 2025."))
	reply := slackfake.MessageEvent("Ev2", "U1", "2025", "1700000000.000300", root)
	w.send(reply, "")
	w.send(reply, "1")
	w.send(slackfake.MessageEvent("Ev3", "U1", "2025", "1700000000.000300", root), "") // repeated with a new id
	w.waitJob(root, core.JobSucceeded)

	if jobs := w.jobs(root); len(jobs) != 1 {
		t.Errorf("%d jobs, want the asking one resumed", len(jobs))
	}
	if n := len(w.sys.LLM.Requests()); n != 2 {
		t.Errorf("%d LLM requests, want 2 (ask, resume once)", n)
	}
	eventually(t, "the answer in the thread", func() bool {
		for _, c := range w.slack.Recorded("chat.postMessage") {
			if strings.Contains(c.Text, "Report for 2025.") && c.ThreadTS == root {
				return true
			}
		}
		return false
	})
}

func TestLongAnswer(t *testing.T) {
	w := newWorld(t)
	var b strings.Builder
	for b.Len() < 20000 {
		b.WriteString("Some prose about the code & why it is so.\n\n```go\nfunc main() {\n\tif a < b {\n\t\tprintln(\"<!channel>\")\n\t}\n}\n```\n\n")
	}
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", b.String()))
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> write a lot", root, ""), "")
	w.waitJob(root, core.JobSucceeded)
	eventually(t, "✅ on the mention", func() bool { return w.reacted(root, "white_check_mark") })

	uploads := w.slack.Recorded("files.completeUploadExternal")
	var answer []slackfake.Call
	for _, c := range w.slack.Recorded("chat.postMessage") {
		if strings.Contains(c.Text, "Some prose") {
			answer = append(answer, c)
		}
	}
	if len(uploads) == 0 && len(answer) == 0 {
		t.Fatal("the answer arrived neither as posts nor as a file")
	}
	for i, c := range answer {
		if n := len([]rune(c.Text)); n > 3000 {
			t.Errorf("post %d has %d characters", i, n)
		}
		if strings.Count(c.Text, "```")%2 != 0 {
			t.Errorf("post %d leaves a code fence open:\n%s", i, c.Text)
		}
		if strings.Contains(c.Text, "<!channel>") {
			t.Errorf("post %d pings the channel", i)
		}
	}
	for _, u := range uploads {
		if u.ThreadTS != root {
			t.Errorf("file shared in thread %q, want %s", u.ThreadTS, root)
		}
		content := w.slack.File(u.Name)
		if strings.Count(content, "```")%2 != 0 || !strings.Contains(content, "func main()") {
			t.Errorf("uploaded answer is not the Markdown with its fences: %.200q", content)
		}
	}
}

func TestAttachmentLandsInInput(t *testing.T) {
	w := newWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Read it."))
	const root = "1700000000.000100"
	ev := map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBATON> read this", "ts": root, "channel": "C1", "event_ts": root,
		"files": []map[string]any{{"id": "F1", "name": "notes.txt", "size": 18, "url_private_download": w.slack.DownloadURL("notes.txt")}}}
	w.send(slackfake.Callback("Ev1", ev), "")
	w.waitJob(root, core.JobSucceeded)
	task, err := w.sys.Store.TaskByThread(context.Background(), thread(root))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(task.Workspace, "input", "notes.txt"))
	if err != nil || string(b) != "content of notes.txt" {
		t.Errorf("input/notes.txt = %q, %v; want the file downloaded with the bot token", b, err)
	}
}

// TestAttachmentOverTheLimit: a file larger than files.max_bytes is not
// downloaded, the thread is told why, and the request still runs.
func TestAttachmentOverTheLimit(t *testing.T) {
	w := newWorldWith(t, chattest.Options{MaxFileBytes: 1000})
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Done without it."))
	const root = "1700000000.000200"
	ev := map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBATON> read this", "ts": root, "channel": "C1", "event_ts": root,
		"files": []map[string]any{{"id": "F2", "name": "huge.bin", "size": 50_000_000, "url_private_download": w.slack.DownloadURL("huge.bin")}}}
	w.send(slackfake.Callback("Ev2", ev), "")
	w.waitJob(root, core.JobSucceeded)
	w.waitPost("C1", root, "I could not take the file huge.bin")
	task, err := w.sys.Store.TaskByThread(context.Background(), thread(root))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(task.Workspace, "input", "huge.bin")); !os.IsNotExist(err) {
		t.Errorf("input/huge.bin: %v, want no such file", err)
	}
}

// jobsIn returns the jobs of the task of ref, newest first.
func (w *world) jobsIn(ref core.ThreadRef) []core.Job {
	w.t.Helper()
	ctx := context.Background()
	task, err := w.sys.Store.TaskByThread(ctx, ref)
	if err != nil {
		return nil
	}
	jobs, err := w.sys.Store.Jobs(ctx, core.JobFilter{TaskID: task.ID})
	if err != nil {
		w.t.Fatal(err)
	}
	return jobs
}

// posts returns the texts posted in channel's thread ts ("" for a DM
// channel's own), in order.
func (w *world) posts(channel, ts string) []string {
	var out []string
	for _, c := range w.slack.Recorded("chat.postMessage") {
		if c.Channel == channel && c.ThreadTS == ts {
			out = append(out, c.Text)
		}
	}
	return out
}

// waitPost waits for a post containing text in channel's thread ts and
// returns every post of that thread.
func (w *world) waitPost(channel, ts, text string) []string {
	w.t.Helper()
	eventually(w.t, "a post saying "+text, func() bool {
		return slices.ContainsFunc(w.posts(channel, ts), func(p string) bool { return strings.Contains(p, text) })
	})
	return w.posts(channel, ts)
}

// checkAborted checks that a job slowed down by the model was aborted by
// U1, said so last in its thread, and posted no answer.
func (w *world) checkAborted(jobs []core.Job, channel, ts string) {
	w.t.Helper()
	if len(jobs) != 1 || jobs[0].State != core.JobAborted || jobs[0].AbortedBy != "slack:U1" {
		w.t.Fatalf("jobs = %+v; want one, aborted by slack:U1", jobs)
	}
	posts := w.waitPost(channel, ts, "was aborted by")
	for _, p := range posts {
		if strings.Contains(p, "late answer") {
			w.t.Errorf("the answer was posted after all: %q", p)
		}
	}
	if last := posts[len(posts)-1]; !strings.Contains(last, "was aborted by") {
		w.t.Errorf("posted after the abort notice: %q (all: %q)", last, posts)
	}
	if n := len(w.sys.LLM.Requests()); n != 1 {
		w.t.Errorf("%d model requests, want the one aborted", n)
	}
}

// TestAbortInThread: `!abort` in the thread during a slow model call.
func TestAbortInThread(t *testing.T) {
	w := newWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "late answer").After(time.Hour))
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> take your time", root, ""), "")
	eventually(t, "the slow model call", func() bool { return len(w.sys.LLM.Requests()) > 0 })
	w.send(slackfake.MessageEvent("Ev2", "U1", "!abort", "1700000000.000200", root), "")
	w.waitJob(root, core.JobAborted)
	eventually(t, "❌ on the mention", func() bool { return w.reacted(root, "x") })
	w.checkAborted(w.jobs(root), "C1", root)
}

// TestReactionAbortsInDirectMessages: ❌ on the request in a direct
// message stops its job, as on a thread's root in a channel; the bot's
// own ❌ and one on another message do nothing.
func TestReactionAbortsInDirectMessages(t *testing.T) {
	w := newWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "late answer").After(time.Hour))
	const ts = "1700000000.000100"
	dm := core.ThreadRef{Platform: core.PlatformSlack, Team: slackfake.Team, Channel: "D1", Thread: "D1"}
	w.send(slackfake.Callback("Ev1", map[string]any{"type": "message", "channel_type": "im", "user": "U1", "text": "take your time", "ts": ts, "channel": "D1", "event_ts": ts}), "")
	eventually(t, "the slow model call", func() bool { return len(w.sys.LLM.Requests()) > 0 })
	reaction := func(id, user, on string) string {
		return slackfake.Callback(id, map[string]any{"type": "reaction_added", "user": user, "reaction": "x", "item_user": "U1",
			"item": map[string]any{"type": "message", "channel": "D1", "ts": on}, "event_ts": "1700000000.000900"})
	}
	w.send(reaction("Ev2", slackfake.BotUser, ts), "")
	w.send(reaction("Ev3", "U1", "1700000000.000050"), "") // an older message
	time.Sleep(200 * time.Millisecond)                     // let a wrong abort show
	if jobs := w.jobsIn(dm); len(jobs) != 1 || jobs[0].State != core.JobRunning {
		t.Fatalf("jobs = %+v after ❌ by the bot and on another message; want one running", jobs)
	}
	w.send(reaction("Ev4", "U1", ts), "")
	eventually(t, "the job aborted", func() bool {
		jobs := w.jobsIn(dm)
		return len(jobs) == 1 && jobs[0].State == core.JobAborted
	})
	w.checkAborted(w.jobsIn(dm), "D1", "")
}

// TestOutputUploadedIntoThread: a file the agent writes to output/ is
// uploaded into the task's thread when the job completes.
func TestOutputUploadedIntoThread(t *testing.T) {
	w := newWorld(t)
	const content = "# Report\n\nAll 3 checks passed.\n"
	w.sys.LLM.Script(
		llmtest.Call("Write", `{"path":"output/report.md","content":"# Report\n\nAll 3 checks passed.\n"}`),
		llmtest.Transition("COMPLETE", "The report is attached."),
	)
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> write the report", root, ""), "")
	w.waitJob(root, core.JobSucceeded)
	eventually(t, "the file shared", func() bool { return len(w.slack.Recorded("files.completeUploadExternal")) > 0 })
	if got := w.slack.Recorded("files.getUploadURLExternal"); len(got) != 1 || got[0].Name != "report.md" {
		t.Errorf("upload URLs asked for %+v, want one for report.md", got)
	}
	ups := w.slack.Recorded("files.completeUploadExternal")
	if len(ups) != 1 || ups[0].Channel != "C1" || ups[0].ThreadTS != root {
		t.Fatalf("files shared %+v, want one in C1 thread %s", ups, root)
	}
	if got := w.slack.File(ups[0].Name); got != content {
		t.Errorf("uploaded %q, want %q", got, content)
	}
	w.waitPost("C1", root, "The report is attached.")
}

// TestOutputOverTheCapAndHostileNames: of the files the agent writes to
// output/, the one over files.max_bytes is not uploaded and the thread is
// told where it is; the one under it is uploaded under a name that pings
// nobody and reads as stored.
func TestOutputOverTheCapAndHostileNames(t *testing.T) {
	const limit = 1000
	w := newWorldWith(t, chattest.Options{MaxFileBytes: limit})
	w.sys.LLM.Script(
		llmtest.Call("Write", fmt.Sprintf(`{"path":"output/big.bin","content":%q}`, strings.Repeat("b", 39*limit))),
		llmtest.Call("Write", `{"path":"output/<!channel> @everyone\u202egnp.md","content":"# Report"}`),
		llmtest.Transition("COMPLETE", "The report is attached."),
	)
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> write the report", root, ""), "")
	w.waitJob(root, core.JobSucceeded)
	posts := w.waitPost("C1", root, "is over the 1.0 kB upload limit and was not sent")
	if !slices.Contains(posts, "output/big.bin (39 kB) is over the 1.0 kB upload limit and was not sent; it stays in the task's workspace.") {
		t.Errorf("no note naming output/big.bin among the posts:\n%s", strings.Join(posts, "\n"))
	}
	eventually(t, "the report shared", func() bool { return len(w.slack.Recorded("files.completeUploadExternal")) > 0 })
	const z = "\u200b"
	if got := w.slack.Recorded("files.getUploadURLExternal"); len(got) != 1 || got[0].Name != "@"+z+"channel @"+z+"everyonegnp.md" {
		t.Errorf("files uploaded %+v, want only the report, named inertly", got)
	}
	ups := w.slack.Recorded("files.completeUploadExternal")
	if len(ups) != 1 || ups[0].Text != "output/@"+z+"channel @"+z+"everyonegnp.md" {
		t.Errorf("files shared %+v, want one, its comment inert", ups)
	}
	if len(ups) == 1 {
		if got := w.slack.File(ups[0].Name); got != "# Report" {
			t.Errorf("uploaded %q, want the report", got)
		}
	}
}

// gated hands messages to svc once open is closed, saying on entered
// that the first one arrived; it ignores ctx while it waits, as a slow
// store would.
type gated struct {
	Service
	entered chan struct{}
	once    sync.Once
	open    chan struct{}
}

func (g *gated) HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.open
	return g.Service.HandleMessage(ctx, m)
}

// TestShutdownHandlesAcknowledgedEvents: events acknowledged before
// shutdown still become tasks and comments; events arriving after it are
// refused so that Slack sends them again.
func TestShutdownHandlesAcknowledgedEvents(t *testing.T) {
	sys := chattest.Start(t, chattest.Options{})
	sys.LLM.Handle(func(llmtest.Request) llmtest.Step {
		return llmtest.Transition("ASK", "need more", "question", "Which one?")
	})
	g := &gated{Service: sys.Service, entered: make(chan struct{}), open: make(chan struct{})}
	srv, cancel, done := runOneWorker(t, g, time.Minute)
	send := func(body string) int {
		status, _ := do(t, slackfake.Sign(t, srv.URL, "/slack/events", body, time.Now(), "application/json"))
		return status
	}

	roots := []string{"1700000000.000100", "1700000000.000200", "1700000000.000300"}
	for i, root := range roots {
		if s := send(slackfake.MentionEvent(fmt.Sprint("Ev", i), "U1", "<@UBATON> task "+fmt.Sprint(i), root, "")); s != 200 {
			t.Fatalf("mention %d answered %d", i, s)
		}
	}
	if s := send(slackfake.MessageEvent("Ev9", "U2", "a comment on the first", "1700000000.000400", roots[0])); s != 200 {
		t.Fatalf("comment answered %d", s)
	}
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the first event never reached the service")
	}
	cancel() // shutdown begins while one event is handled and three wait
	close(g.open)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return")
	}

	for i, root := range roots {
		task, err := sys.Store.TaskByThread(context.Background(), thread(root))
		if err != nil {
			t.Errorf("mention %d acknowledged before shutdown: no task (%v)", i, err)
			continue
		}
		if jobs, _ := sys.Store.Jobs(context.Background(), core.JobFilter{TaskID: task.ID}); len(jobs) != 1 {
			t.Errorf("task of mention %d has %d jobs, want 1", i, len(jobs))
		}
		if i != 0 {
			continue
		}
		comments, err := sys.Store.RecentComments(context.Background(), task.ID, 10)
		if err != nil || !slices.ContainsFunc(comments, func(c core.Comment) bool { return c.Text == "a comment on the first" }) {
			t.Errorf("comments of the first task = %+v, %v; want the comment acknowledged before shutdown", comments, err)
		}
	}
	if s := send(slackfake.MentionEvent("Ev10", "U1", "<@UBATON> too late", "1700000000.000500", "")); s != http.StatusServiceUnavailable {
		t.Errorf("an event after shutdown answered %d, want 503 so that Slack retries", s)
	}
}

// TestShutdownDrainIsBounded: events still unhandled DrainTimeout after
// shutdown began are given up, and Run returns.
func TestShutdownDrainIsBounded(t *testing.T) {
	stuck := &stuckService{started: make(chan struct{}, 8), gaveUp: make(chan struct{}, 8)}
	srv, cancel, done := runOneWorker(t, stuck, 50*time.Millisecond)
	for i := range 3 {
		body := slackfake.MentionEvent(fmt.Sprint("Ev", i), "U1", "<@UBATON> hi", fmt.Sprintf("1700000000.00010%d", i), "")
		if s, b := do(t, slackfake.Sign(t, srv.URL, "/slack/events", body, time.Now(), "application/json")); s != 200 {
			t.Fatalf("event %d answered %d: %s", i, s, b)
		}
	}
	<-stuck.started
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return: the drain is not bounded")
	}
	select {
	case <-stuck.gaveUp:
	default:
		t.Error("the event being handled was not told to give up")
	}
	if n := len(stuck.started); n != 0 {
		t.Errorf("%d more events started after the drain time was up", n)
	}
}

// runOneWorker runs an HTTP-mode adapter with one event worker over svc and
// returns its server, the cancel that starts its shutdown and Run's result.
func runOneWorker(t *testing.T, svc Service, drain time.Duration) (*httptest.Server, context.CancelFunc, <-chan error) {
	t.Helper()
	f := slackfake.NewServer(t)
	a, err := New(svc, Config{Inbox: newInbox(t), Mode: ModeHTTP, BotToken: slackfake.BotToken, SigningSecret: slackfake.SigningSecret, APIURL: f.URL(), Workers: 1, DrainTimeout: drain, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv, cancel, done
}

// stuckService never finishes a message before its context ends.
type stuckService struct {
	recorder
	started, gaveUp chan struct{}
}

func (s *stuckService) HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	s.gaveUp <- struct{}{}
	return chat.Reply{}, ctx.Err()
}
