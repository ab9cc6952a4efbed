package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/policy"
)

// A job that waits for an approval loses nothing when its process is
// killed: the click, taken by the next process over the same data, resumes
// it at the pending call.

var restartRules = []policy.Rule{{Tool: "Bash", Match: regexp.MustCompile(`^touch `), Action: policy.Ask}}

var (
	restartThread = core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "1700.1"}
	restartAlice  = chat.Author{ID: "slack:alice", Name: "alice"}
)

// restartChildEnv names the data directory of the child process that
// parks the job and waits to be killed.
const restartChildEnv = "BATON_E2E_PARK_DIR"

// TestApprovalParkChild is the first process: it parks a job for approval
// in the stack over $BATON_E2E_PARK_DIR, prints "parked JOB WAIT" and
// waits to be killed. Run alone, it does nothing.
func TestApprovalParkChild(t *testing.T) {
	dir := os.Getenv(restartChildEnv)
	if dir == "" {
		return // only ever the child of TestApprovalSurvivesAKill
	}
	ctx := context.Background()
	sys := startStack(t, stackOptions{Dir: dir, Rules: restartRules})
	sys.LLM.Script(llmtest.Call("Bash", `{"command":"touch approved.txt"}`))
	if _, err := sys.Service.HandleMessage(ctx, chat.Message{Thread: restartThread, Channel: "slack:C1", MsgID: "1700.1",
		Author: restartAlice, Text: "make the file", Addressed: true}); err != nil {
		t.Fatal(err)
	}
	var job core.Job
	eventually(t, "the job to wait for approval", func() bool {
		task, err := sys.Store.TaskByThread(ctx, restartThread)
		if err != nil {
			return false
		}
		job, err = sys.Store.ActiveJob(ctx, task.ID)
		return err == nil && job.State == core.JobWaitingApproval
	})
	fmt.Printf("parked %d %d\n", job.ID, job.WaitSeq)
	time.Sleep(time.Hour) // killed before
}

func TestApprovalSurvivesAKill(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	child := exec.Command(os.Args[0], "-test.run=^TestApprovalParkChild$", "-test.v")
	child.Env = append(os.Environ(), restartChildEnv+"="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	var jobID, waitSeq int64
	lines := bufio.NewScanner(out)
	for jobID == 0 && lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "parked "); ok {
			if _, err := fmt.Sscan(rest, &jobID, &waitSeq); err != nil {
				t.Fatal(err)
			}
		}
	}
	if jobID == 0 {
		t.Fatalf("the child did not park a job: %v", lines.Err())
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL: no shutdown of any kind
		t.Fatal(err)
	}
	_ = child.Wait()

	second := startStack(t, stackOptions{Dir: dir, Rules: restartRules})
	second.LLM.Script(llmtest.Transition("COMPLETE", "made it"))
	r, err := second.Service.HandleAction(ctx, chat.Action{Value: "approve:" + core.ApprovalKey(jobID, waitSeq),
		Thread: restartThread, Channel: "slack:C1", Author: restartAlice})
	if err != nil || r.Text != "" {
		t.Fatalf("click after the kill = %+v, %v", r, err)
	}
	eventually(t, "the job to finish", func() bool {
		j, err := second.Store.Job(ctx, jobID)
		return err == nil && j.State == core.JobSucceeded
	})
	task, err := second.Store.TaskByThread(ctx, restartThread)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(task.Workspace, "approved.txt")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
	reqs := second.LLM.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model requests after the kill = %d, want 1 (resumed at the call)", len(reqs))
	}
	callID, found := "", false
	for _, m := range reqs[0].Messages {
		if m.Role == "assistant" && len(m.ToolCalls) == 1 && m.ToolCalls[0].Name == "Bash" {
			callID = m.ToolCalls[0].ID
		}
		found = found || (m.Role == "tool" && callID != "" && m.ToolCallID == callID)
	}
	if !found {
		t.Error("the resumed request has no tool result for the approved call")
	}
}
