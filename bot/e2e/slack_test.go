package e2e_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack"
	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/outbox"
	"github.com/baton-bot/baton/core/sqlite"
)

// slackWorld is the whole of Baton in-process behind an HTTP-mode Slack
// adapter, delivering to the fake Slack.
type slackWorld struct {
	t     testing.TB
	sys   *system
	slack *slackfake.Server
	base  string
}

func newSlackWorld(t testing.TB) *slackWorld {
	t.Helper()
	return newSlackWorldWith(t, stackOptions{})
}

func newSlackWorldWith(t testing.TB, opts stackOptions) *slackWorld {
	t.Helper()
	sys := startStack(t, opts)
	return slackWorldOver(t, sys, sys.Service, slack.Config{Inbox: sys.Store})
}

// slackWorldOver puts an HTTP-mode adapter configured by cfg, handing events to
// svc, in front of sys.
func slackWorldOver(t testing.TB, sys *system, svc slack.Service, cfg slack.Config) *slackWorld {
	t.Helper()
	f := slackfake.NewServer(t)
	a, base := slackStart(t, svc, f, cfg)
	d := outbox.New(sys.Store, core.PlatformSlack, a.Poster(), outbox.Config{Split: chattext.Split, Poll: 20 * time.Millisecond, MaxFileBytes: sys.MaxFileBytes})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &slackWorld{t: t, sys: sys, slack: f, base: base}
}

// slackStart runs an HTTP-mode adapter over svc and the fake Slack; its
// inbox is a store of its own unless cfg names one. It returns the
// adapter and the base URL of its Handler.
func slackStart(t testing.TB, svc slack.Service, f *slackfake.Server, cfg slack.Config) (*slack.Adapter, string) {
	t.Helper()
	if cfg.Inbox == nil {
		cfg.Inbox = slackInbox(t)
	}
	cfg.Mode, cfg.BotToken, cfg.SigningSecret, cfg.APIURL = slack.ModeHTTP, slackfake.BotToken, slackfake.SigningSecret, f.URL()
	a, err := slack.New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return a, srv.URL
}

// slackRunOneWorker runs an HTTP-mode adapter with one event worker over
// svc, its inbox a store of its own, and returns its server, the cancel
// that starts its shutdown and Run's result.
func slackRunOneWorker(t *testing.T, svc slack.Service, drain time.Duration) (*httptest.Server, context.CancelFunc, <-chan error) {
	t.Helper()
	f := slackfake.NewServer(t)
	a, err := slack.New(svc, slack.Config{Inbox: slackInbox(t), Mode: slack.ModeHTTP, BotToken: slackfake.BotToken, SigningSecret: slackfake.SigningSecret,
		APIURL: f.URL(), Workers: 1, DrainTimeout: drain, Logger: slackLogger(t)})
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

// slackInbox opens a store of its own for an adapter's inbox.
func slackInbox(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "inbox.db"), sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// slackDo sends r and returns the answer's status and body.
func slackDo(t testing.TB, r *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// slackThread is the thread under root ts in channel C1, as the adapter
// names it.
func slackThread(ts string) core.ThreadRef {
	return core.ThreadRef{Platform: core.PlatformSlack, Team: slackfake.Team, Channel: "C1", Thread: ts}
}

// slackLogger writes the adapter's log to the test's log.
func slackLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(slackLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type slackLog struct{ t testing.TB }

func (l slackLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *slackWorld) send(body, retry string) {
	w.t.Helper()
	r := slackfake.Sign(w.t, w.base, "/slack/events", body, time.Now(), "application/json")
	if retry != "" {
		r.Header.Set("X-Slack-Retry-Num", retry)
	}
	if status, b := slackDo(w.t, r); status != 200 {
		w.t.Fatalf("event answered %d: %s", status, b)
	}
}

// jobs returns the jobs of the task of the thread under root, newest first.
func (w *slackWorld) jobs(root string) []core.Job {
	w.t.Helper()
	return w.jobsIn(slackThread(root))
}

func (w *slackWorld) waitJob(root string, s core.JobState) {
	w.t.Helper()
	eventually(w.t, "a job "+string(s), func() bool {
		jobs := w.jobs(root)
		return len(jobs) > 0 && jobs[0].State == s
	})
}

// reacted reports whether emoji was added to ts.
func (w *slackWorld) reacted(ts, emoji string) bool {
	for _, c := range w.slack.Recorded("reactions.add") {
		if c.TS == ts && c.Name == emoji {
			return true
		}
	}
	return false
}

func TestSlackMentionAnsweredInThread(t *testing.T) {
	w := newSlackWorld(t)
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

func TestSlackAskAnsweredInThread(t *testing.T) {
	w := newSlackWorld(t)
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

func TestSlackLongAnswer(t *testing.T) {
	w := newSlackWorld(t)
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

func TestSlackAttachmentLandsInInput(t *testing.T) {
	w := newSlackWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Read it."))
	const root = "1700000000.000100"
	ev := map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBATON> read this", "ts": root, "channel": "C1", "event_ts": root,
		"files": []map[string]any{{"id": "F1", "name": "notes.txt", "size": 18, "url_private_download": w.slack.DownloadURL("notes.txt")}}}
	w.send(slackfake.Callback("Ev1", ev), "")
	w.waitJob(root, core.JobSucceeded)
	task, err := w.sys.Store.TaskByThread(context.Background(), slackThread(root))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(task.Workspace, "input", "notes.txt"))
	if err != nil || string(b) != "content of notes.txt" {
		t.Errorf("input/notes.txt = %q, %v; want the file downloaded with the bot token", b, err)
	}
}

// TestSlackAttachmentOverTheLimit: a file larger than files.max_bytes is not
// downloaded, the thread is told why, and the request still runs.
func TestSlackAttachmentOverTheLimit(t *testing.T) {
	w := newSlackWorldWith(t, stackOptions{MaxFileBytes: 1000})
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Done without it."))
	const root = "1700000000.000200"
	ev := map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBATON> read this", "ts": root, "channel": "C1", "event_ts": root,
		"files": []map[string]any{{"id": "F2", "name": "huge.bin", "size": 50_000_000, "url_private_download": w.slack.DownloadURL("huge.bin")}}}
	w.send(slackfake.Callback("Ev2", ev), "")
	w.waitJob(root, core.JobSucceeded)
	w.waitPost("C1", root, "I could not take the file huge.bin")
	task, err := w.sys.Store.TaskByThread(context.Background(), slackThread(root))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(task.Workspace, "input", "huge.bin")); !os.IsNotExist(err) {
		t.Errorf("input/huge.bin: %v, want no such file", err)
	}
}

// A file shared through Slack Connect arrives as a stub without links:
// files.info is asked for it, and the file is downloaded; when files.info
// fails too, the thread hears why and the request still runs.
func TestSlackConnectFileStub(t *testing.T) {
	w := newSlackWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Read it."))
	w.slack.SetFileInfo("F9", map[string]any{"id": "F9", "name": "shared.txt", "size": 21, "file_access": "visible",
		"url_private": w.slack.DownloadURL("shared.txt"), "url_private_download": w.slack.DownloadURL("shared.txt")})
	const root = "1700000000.000100"
	stub := func(id string) map[string]any {
		return map[string]any{"id": id, "mode": "file_access", "file_access": "check_file_info", "created": 0, "timestamp": 0, "user": ""}
	}
	ev := map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBATON> read these", "ts": root, "channel": "C1", "event_ts": root,
		"files": []any{stub("F9"), stub("F10")}}
	w.send(slackfake.Callback("Ev1", ev), "")
	w.waitJob(root, core.JobSucceeded)
	task, err := w.sys.Store.TaskByThread(context.Background(), slackThread(root))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(task.Workspace, "input", "shared.txt"))
	if err != nil || string(b) != "content of shared.txt" {
		t.Errorf("input/shared.txt = %q, %v; want the file files.info pointed to", b, err)
	}
	posts := w.waitPost("C1", root, "I could not take the file F10")
	for _, p := range posts {
		if strings.Contains(p, "shared.txt") {
			t.Errorf("the thread heard about the file that worked: %q", p)
		}
	}
}

// TestSlackGroupAccess: access lists naming a user group let its members in,
// keep others out, and keep everyone out while the group cannot be read.
func TestSlackGroupAccess(t *testing.T) {
	tests := []struct {
		name    string
		user    string
		fail    bool // usergroups.users.list answers an error
		allowed bool
	}{
		{"member", "U1", false, true},
		{"not a member", "U9", false, false},
		{"member, group unreadable", "U1", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := startStack(t, stackOptions{Access: chat.Access{AllowedUsers: []string{"slack-group:S1"}}})
			f := slackfake.NewServer(t)
			f.SetMembers("S1", "U1", "U2")
			if tt.fail {
				f.Fail("usergroups.users.list", "missing_scope")
			}
			_, base := slackStart(t, sys.Service, f, slack.Config{Groups: []string{"slack-group:S1"}})
			sys.LLM.Script(llmtest.Transition("COMPLETE", "Done."))
			const root = "1700000000.000100"
			r := slackfake.Sign(t, base, "/slack/events", slackfake.MentionEvent("Ev1", tt.user, "<@UBATON> do it", root, ""), time.Now(), "application/json")
			if status, b := slackDo(t, r); status != 200 {
				t.Fatalf("event answered %d: %s", status, b)
			}
			if tt.allowed {
				eventually(t, "the job done", func() bool {
					task, err := sys.Store.TaskByThread(context.Background(), slackThread(root))
					if err != nil {
						return false
					}
					jobs, _ := sys.Store.Jobs(context.Background(), core.JobFilter{TaskID: task.ID})
					return len(jobs) == 1 && jobs[0].State == core.JobSucceeded
				})
				return
			}
			eventually(t, "the refusal, to the author alone", func() bool {
				for _, c := range f.Recorded("chat.postEphemeral") {
					if c.User == tt.user && strings.Contains(c.Text, "not allowed to use Baton") {
						return true
					}
				}
				return false
			})
			if _, err := sys.Store.TaskByThread(context.Background(), slackThread(root)); err == nil {
				t.Error("a task was made for an author outside the group")
			}
		})
	}
}

// jobsIn returns the jobs of the task of ref, newest first.
func (w *slackWorld) jobsIn(ref core.ThreadRef) []core.Job {
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
func (w *slackWorld) posts(channel, ts string) []string {
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
func (w *slackWorld) waitPost(channel, ts, text string) []string {
	w.t.Helper()
	eventually(w.t, "a post saying "+text, func() bool {
		return slices.ContainsFunc(w.posts(channel, ts), func(p string) bool { return strings.Contains(p, text) })
	})
	return w.posts(channel, ts)
}

// checkAborted checks that a job slowed down by the model was aborted by
// U1, said so last in its thread, and posted no answer.
func (w *slackWorld) checkAborted(jobs []core.Job, channel, ts string) {
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

// TestSlackAbortInThread: `!abort` in the thread during a slow model call.
func TestSlackAbortInThread(t *testing.T) {
	w := newSlackWorld(t)
	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "late answer").After(time.Hour))
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> take your time", root, ""), "")
	eventually(t, "the slow model call", func() bool { return len(w.sys.LLM.Requests()) > 0 })
	w.send(slackfake.MessageEvent("Ev2", "U1", "!abort", "1700000000.000200", root), "")
	w.waitJob(root, core.JobAborted)
	eventually(t, "❌ on the mention", func() bool { return w.reacted(root, "x") })
	w.checkAborted(w.jobs(root), "C1", root)
}

// TestSlackReactionAbortsInDirectMessages: ❌ on the request in a direct
// message stops its job, as on a thread's root in a channel; the bot's
// own ❌ and one on another message do nothing.
func TestSlackReactionAbortsInDirectMessages(t *testing.T) {
	w := newSlackWorld(t)
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

// TestSlackOutputUploadedIntoThread: a file the agent writes to output/ is
// uploaded into the task's thread when the job completes.
func TestSlackOutputUploadedIntoThread(t *testing.T) {
	w := newSlackWorld(t)
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

// TestSlackOutputOverTheCapAndHostileNames: of the files the agent writes to
// output/, the one over files.max_bytes is not uploaded and the thread is
// told where it is; the one under it is uploaded under a name that pings
// nobody and reads as stored.
func TestSlackOutputOverTheCapAndHostileNames(t *testing.T) {
	const limit = 1000
	w := newSlackWorldWith(t, stackOptions{MaxFileBytes: limit})
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

// slackGated hands messages to svc once open is closed, saying on entered
// that the first one arrived; it ignores ctx while it waits, as a slow
// store would.
type slackGated struct {
	slack.Service
	entered chan struct{}
	once    sync.Once
	open    chan struct{}
}

func (g *slackGated) HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.open
	return g.Service.HandleMessage(ctx, m)
}

// TestSlackShutdownHandlesAcknowledgedEvents: events acknowledged before
// shutdown still become tasks and comments; events arriving after it are
// refused so that Slack sends them again.
func TestSlackShutdownHandlesAcknowledgedEvents(t *testing.T) {
	sys := startStack(t, stackOptions{})
	sys.LLM.Handle(func(llmtest.Request) llmtest.Step {
		return llmtest.Transition("ASK", "need more", "question", "Which one?")
	})
	g := &slackGated{Service: sys.Service, entered: make(chan struct{}), open: make(chan struct{})}
	srv, cancel, done := slackRunOneWorker(t, g, time.Minute)
	send := func(body string) int {
		status, _ := slackDo(t, slackfake.Sign(t, srv.URL, "/slack/events", body, time.Now(), "application/json"))
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
		task, err := sys.Store.TaskByThread(context.Background(), slackThread(root))
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
