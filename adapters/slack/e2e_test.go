package slack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
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
	slack *fakeSlack
	base  string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	sys := chattest.Start(t, chattest.Options{})
	f := newFakeSlack(t)
	a, base := startHTTP(t, sys.Service, f, Config{})
	d := outbox.New(sys.Store, core.PlatformSlack, a.Poster(), outbox.Config{Split: chattext.Split, Poll: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &world{t: t, sys: sys, slack: f, base: base}
}

func (w *world) send(body, retry string) {
	w.t.Helper()
	r := sign(w.t, w.base, "/slack/events", body, time.Now(), "application/json")
	if retry != "" {
		r.Header.Set("X-Slack-Retry-Num", retry)
	}
	if status, b := do(w.t, r); status != 200 {
		w.t.Fatalf("event answered %d: %s", status, b)
	}
}

func (w *world) jobs(root string) []core.Job {
	w.t.Helper()
	ctx := context.Background()
	task, err := w.sys.Store.TaskByThread(ctx, thread(root))
	if err != nil {
		return nil
	}
	jobs, err := w.sys.Store.Jobs(ctx, core.JobFilter{TaskID: task.ID})
	if err != nil {
		w.t.Fatal(err)
	}
	return jobs
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
	for _, c := range w.slack.recorded("reactions.add") {
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
	mention := mentionEvent("Ev1", "U1", "<@UBATON> what is the answer?", root, "")
	w.send(mention, "")
	w.send(messageEvent("Ev2", "U1", "<@UBATON> what is the answer?", root, ""), "")
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
	for i, c := range w.slack.recorded() {
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
		t.Errorf("👀 at %d, answer at %d, ✅ at %d: want all, in that order; calls: %+v", eyes, answer, done, w.slack.recorded())
	}
}

func TestAskAnsweredInThread(t *testing.T) {
	w := newWorld(t)
	w.sys.LLM.Script(llmtest.Transition("ASK", "need a year", "question", "Which year?"))
	const root = "1700000000.000100"
	w.send(mentionEvent("Ev1", "U1", "<@UBATON> make the report", root, ""), "")
	w.waitJob(root, core.JobWaitingHuman)
	eventually(t, "the question in the thread", func() bool {
		for _, c := range w.slack.recorded("chat.postMessage") {
			if strings.Contains(c.Text, "Which year?") && c.ThreadTS == root {
				return true
			}
		}
		return false
	})

	w.sys.LLM.Script(llmtest.Transition("COMPLETE", "Report for 2025."))
	reply := messageEvent("Ev2", "U1", "2025", "1700000000.000300", root)
	w.send(reply, "")
	w.send(reply, "1")
	w.send(messageEvent("Ev3", "U1", "2025", "1700000000.000300", root), "") // repeated with a new id
	w.waitJob(root, core.JobSucceeded)

	if jobs := w.jobs(root); len(jobs) != 1 {
		t.Errorf("%d jobs, want the asking one resumed", len(jobs))
	}
	if n := len(w.sys.LLM.Requests()); n != 2 {
		t.Errorf("%d LLM requests, want 2 (ask, resume once)", n)
	}
	eventually(t, "the answer in the thread", func() bool {
		for _, c := range w.slack.recorded("chat.postMessage") {
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
	w.send(mentionEvent("Ev1", "U1", "<@UBATON> write a lot", root, ""), "")
	w.waitJob(root, core.JobSucceeded)
	eventually(t, "✅ on the mention", func() bool { return w.reacted(root, "white_check_mark") })

	uploads := w.slack.recorded("files.completeUploadExternal")
	var answer []call
	for _, c := range w.slack.recorded("chat.postMessage") {
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
		w.slack.mu.Lock()
		content := string(w.slack.files[u.Name])
		w.slack.mu.Unlock()
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
		"files": []map[string]any{{"id": "F1", "name": "notes.txt", "size": 18, "url_private_download": w.slack.url() + "download/notes.txt"}}}
	w.send(callback("Ev1", ev), "")
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
