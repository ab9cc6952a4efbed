package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/policy"
)

// A subtask's risky call is judged in the parent's channel (a rule for
// that channel holds for the subtasks its requests split into) and asked in
// the parent's thread, where the requester decides it.
func TestSubtaskApprovalAskedInTheParentsThread(t *testing.T) {
	sys := startStack(t, stackOptions{Rules: []policy.Rule{
		{Tool: "Bash", Match: regexp.MustCompile(`^touch `), Channels: []string{"slack:C1"}, Action: policy.Ask},
	}})
	w := &chatWorld{t: t, srv: sys.LLM, store: sys.Store, svc: sys.Service}
	w.srv.Handle(func(req llmtest.Request) llmtest.Step {
		user := req.Messages[1].Text()
		last := req.Messages[len(req.Messages)-1]
		switch {
		case strings.Contains(user, "## Results of subtasks"):
			return llmtest.Transition("COMPLETE", "all done")
		case strings.Contains(user, "## Request\nmake the file") && last.Role == "tool":
			return llmtest.Transition("COMPLETE", "made it")
		case strings.Contains(user, "## Request\nmake the file"):
			return llmtest.Call("Bash", `{"command":"touch sub.txt"}`)
		}
		b, _ := json.Marshal(map[string]any{"next_step": "WAIT_SUBTASKS", "summary": "splitting", "subtasks": []map[string]string{
			{"title": "the file", "instruction": "make the file"}}})
		return llmtest.Call("transition", string(b))
	})
	w.say("alice", "split it")
	ctx := context.Background()
	parent := w.task()
	var child core.Job
	eventually(t, "the subtask to wait for approval", func() bool {
		jobs, err := w.store.Jobs(ctx, core.JobFilter{States: []core.JobState{core.JobWaitingApproval}})
		if err != nil || len(jobs) != 1 {
			return false
		}
		child = jobs[0]
		return true
	})
	if child.ParentJobID == 0 {
		t.Fatalf("the waiting job %+v is not the subtask's", child)
	}
	a, err := w.store.Approval(ctx, child.ID, child.WaitSeq)
	if err != nil || a.Channel != "slack:C1" {
		t.Fatalf("approval = %+v, %v; want it judged in the parent's channel", a, err)
	}
	var asked bool
	for _, o := range w.outbox() {
		asked = asked || strings.Contains(o, "Approval needed before Bash runs")
	}
	if !asked {
		t.Fatal("the parent's thread was not asked")
	}
	if r := w.say("alice", "!approve"); r.Text != "" {
		t.Fatalf("!approve in the parent's thread = %q", r.Text)
	}
	done := w.waitJob(core.JobSucceeded)
	if done.ResultSummary != "all done" {
		t.Errorf("parent = %+v", done)
	}
	childTask, err := w.store.Task(ctx, child.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(childTask.Workspace, "sub.txt")); err != nil {
		t.Errorf("the approved call did not run in the subtask: %v", err)
	}
	if childTask.ParentTaskID != parent.ID {
		t.Errorf("subtask's parent = %d, want %d", childTask.ParentTaskID, parent.ID)
	}
}
