package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/policy"
)

// A job that waits for an approval loses nothing when its process ends:
// the click, taken by the next process, resumes it at the pending call.
func TestApprovalSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	rules := []policy.Rule{{Tool: "Bash", Match: regexp.MustCompile(`^touch `), Action: policy.Ask}}
	thread := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "1700.1"}
	alice := chat.Author{ID: "slack:alice", Name: "alice"}
	ctx := context.Background()

	first := startStack(t, stackOptions{Dir: dir, Rules: rules})
	first.LLM.Script(llmtest.Call("Bash", `{"command":"touch approved.txt"}`))
	if _, err := first.Service.HandleMessage(ctx, chat.Message{Thread: thread, Channel: "slack:C1", MsgID: "1700.1",
		Author: alice, Text: "make the file", Addressed: true}); err != nil {
		t.Fatal(err)
	}
	var job core.Job
	eventually(t, "the job to wait for approval", func() bool {
		task, err := first.Store.TaskByThread(ctx, thread)
		if err != nil {
			return false
		}
		job, err = first.Store.ActiveJob(ctx, task.ID)
		return err == nil && job.State == core.JobWaitingApproval
	})
	task, _ := first.Store.TaskByThread(ctx, thread)
	first.Stop()

	second := startStack(t, stackOptions{Dir: dir, Rules: rules})
	second.LLM.Script(llmtest.Transition("COMPLETE", "made it"))
	r, err := second.Service.HandleAction(ctx, chat.Action{Value: "approve:" + core.ApprovalKey(job.ID, job.WaitSeq),
		Thread: thread, Channel: "slack:C1", Author: alice})
	if err != nil || r.Text != "" {
		t.Fatalf("click after the restart = %+v, %v", r, err)
	}
	eventually(t, "the job to finish", func() bool {
		j, err := second.Store.Job(ctx, job.ID)
		return err == nil && j.State == core.JobSucceeded
	})
	if _, err := os.Stat(filepath.Join(task.Workspace, "approved.txt")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
	reqs := second.LLM.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model requests after the restart = %d, want 1 (resumed at the call)", len(reqs))
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
