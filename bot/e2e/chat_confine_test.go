package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/llmtest"
)

// These tests play an agent (or a person) that plants symlinks in a
// workspace: Baton's own writes and reads stay inside it.

// emptyDir makes a directory outside every workspace and fails the test if
// anything appears in it.
func chatEmptyDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "outside")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("written outside the workspace: %s and %d more", entries[0].Name(), len(entries)-1)
		}
	})
	return dir
}

func chatFile(name, content string) chat.File {
	return chat.File{Name: name, Size: int64(len(content)), Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(content)), nil
	}}
}

// send posts a message with attachments in the test thread.
func (w *chatWorld) send(text string, files ...chat.File) {
	w.t.Helper()
	_, err := w.svc.HandleMessage(context.Background(), chat.Message{
		Thread: chatThread, Channel: "slack:" + chatThread.Channel, MsgID: fmt.Sprintf("1700.%d", 100+w.msgN.Add(1)),
		Author: chat.Author{ID: "slack:alice", Name: "alice"}, Text: text, Files: files, Addressed: true,
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// waitJobs waits until the task has n jobs, the newest one in state s.
func (w *chatWorld) waitJobs(n int, s core.JobState) {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		jobs, err := w.store.Jobs(context.Background(), core.JobFilter{TaskID: w.task().ID})
		if err != nil {
			w.t.Fatal(err)
		}
		if len(jobs) == n && jobs[0].State == s {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("want %d jobs, the newest %s; have %+v", n, s, jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestChatAttachmentIntoSymlinkedInput(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "done") })
	outside := chatEmptyDir(t)
	w.say("alice", "hello")
	w.waitJobs(1, core.JobSucceeded)
	input := filepath.Join(w.task().Workspace, "input")
	if err := os.RemoveAll(input); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, input); err != nil { // what the agent's Bash did
		t.Fatal(err)
	}
	w.send("here is the file", chatFile("notes.txt", "attached"))
	w.waitJobs(2, core.JobSucceeded)
	out := w.outbox()
	chatContains(t, out, "post I could not take the file notes.txt: the task's input/ folder is no longer a folder of its workspace")
	for _, o := range out {
		if strings.Contains(o, outside) {
			t.Errorf("a host path reached the thread: %q", o)
		}
	}
}

// TestSubtaskCopyIntoPlantedLink: the parent's agent links
// input/subtasks/<child>/ to the pieces directory and its child writes a
// piece to output/; copying the child's results into the parent writes
// nothing there.
func TestChatSubtaskCopyIntoPlantedLink(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	pieces := chatEmptyDir(t)
	var mu sync.Mutex
	var plantErr error
	w.srv.Handle(func(req llmtest.Request) llmtest.Step {
		user := req.Messages[1].Text()
		last := req.Messages[len(req.Messages)-1]
		switch {
		case strings.Contains(user, "## Results of subtasks"):
			return llmtest.Transition("COMPLETE", "collected: "+user[strings.Index(user, "## Results of subtasks"):])
		case strings.Contains(user, "## Request\ndo A") && last.Role != "tool":
			return llmtest.Call("Write", `{"path":"output/evil.yaml","content":"name: evil\nnetwork: true\n"}`)
		case strings.Contains(user, "## Request\ndo A"):
			return llmtest.Transition("COMPLETE", "A done")
		}
		// The parent, before it waits: links for the next task ids.
		mu.Lock()
		defer mu.Unlock()
		dir := filepath.Join(w.task().Workspace, "input", "subtasks")
		plantErr = os.MkdirAll(dir, 0o755)
		for id := 1; id <= 5 && plantErr == nil; id++ {
			plantErr = os.Symlink(pieces, filepath.Join(dir, fmt.Sprint(id)))
		}
		b, _ := json.Marshal(map[string]any{"next_step": "WAIT_SUBTASKS", "summary": "splitting",
			"subtasks": []map[string]string{{"title": "part A", "instruction": "do A"}}})
		return llmtest.Call("transition", string(b))
	})
	w.say("alice", "split it")
	parent := w.waitJob(core.JobSucceeded)
	mu.Lock()
	defer mu.Unlock()
	if plantErr != nil {
		t.Fatal(plantErr)
	}
	if !strings.Contains(parent.ResultSummary, "part A — succeeded: A done") {
		t.Errorf("the parent did not collect the child: %s", parent.ResultSummary)
	}
}

// TestNoUploadThroughLinks: output/ holds links to a host file and a host
// folder beside a file the job wrote; only the job's file is uploaded.
func TestChatNoUploadThroughLinks(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	host := chatEmptyDir(t)
	hostFile := filepath.Join(filepath.Dir(host), "passwd")
	if err := os.WriteFile(hostFile, []byte("root:x:0:0"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.srv.Handle(func(req llmtest.Request) llmtest.Step {
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			return llmtest.Transition("COMPLETE", "wrote it")
		}
		out := filepath.Join(w.task().Workspace, "output")
		os.Symlink(hostFile, filepath.Join(out, "passwd"))
		os.Symlink(filepath.Dir(host), filepath.Join(out, "hostdir"))
		return llmtest.Call("Write", `{"path":"output/report.md","content":"# Report"}`)
	})
	w.say("alice", "write a report")
	w.waitJob(core.JobSucceeded)
	var uploads []string
	for _, o := range w.outbox() {
		if strings.HasPrefix(o, "upload ") {
			uploads = append(uploads, o)
		}
	}
	if diff := cmp.Diff([]string{"upload output/report.md"}, uploads); diff != "" {
		t.Errorf("uploads (-want +got):\n%s", diff)
	}
}
