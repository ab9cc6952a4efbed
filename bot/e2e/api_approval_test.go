package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/adapters/api"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/policy"
)

// apiApprovalWorld is the task API's world (apiWorld) with a policy
// that asks before any `touch`.
func apiApprovalWorld(t testing.TB) *apiWorld {
	t.Helper()
	sys := startStack(t, stackOptions{Rules: []policy.Rule{{Tool: "Bash", Match: regexp.MustCompile(`^touch `), Action: policy.Ask}}})
	hs := httptest.NewServer(api.New(sys.Service, sys.Store, api.Config{Token: apiToken}).Handler())
	t.Cleanup(hs.Close)
	w := &apiWorld{t: t, llm: sys.LLM, store: sys.Store, url: hs.URL, wsRoot: sys.WorkspaceRoot}
	t.Cleanup(w.checkNoPaths)
	return w
}

type apiApprovalItem struct {
	ID      int64  `json:"id"`
	Tool    string `json:"tool"`
	Summary string `json:"summary"`
}

// apiApprovalList returns the approvals a task's view lists.
func apiApprovalList(t testing.TB, r apiResponse) []apiApprovalItem {
	t.Helper()
	var v struct {
		Approvals *[]apiApprovalItem `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(r.Raw), &v); err != nil {
		t.Fatal(err)
	}
	if v.Approvals == nil {
		t.Fatalf("the view has no approvals list: %s", r.Raw)
	}
	return *v.Approvals
}

// apiApprovalDecide posts a decision on approval id of task.
func apiApprovalDecide(w *apiWorld, task int64, approval, body string) apiResponse {
	w.t.Helper()
	return w.do("POST", "/api/tasks/"+apiItoa(task)+"/approvals/"+approval, apiToken, body)
}

func apiApprovalError(r apiResponse) string {
	s, _ := r.Body["error"].(string)
	return s
}

// TestAPIApprovalDecide: a task whose job waits for approval lists it; a
// POST that approves it as the requester runs the call and the job ends;
// the unknown, the malformed, the refused and the second decision change
// nothing.
func TestAPIApprovalDecide(t *testing.T) {
	w := apiApprovalWorld(t)
	w.llm.Script(llmtest.Transition("COMPLETE", "hello"))
	other := w.create(`{"text": "say hello", "author": "alice"}`)
	w.waitJob(other, "succeeded")

	w.llm.Script(
		llmtest.Call("Bash", `{"command":"touch approved.txt"}`),
		llmtest.Transition("COMPLETE", "The file is made."),
	)
	id := w.create(`{"text": "make the file", "author": "alice"}`)
	w.waitJob(id, "waiting_approval")
	pending := apiApprovalList(t, w.do("GET", "/api/tasks/"+apiItoa(id), apiToken, ""))
	if len(pending) != 1 {
		t.Fatalf("approvals = %+v, want the one waiting", pending)
	}
	if diff := cmp.Diff(apiApprovalItem{ID: pending[0].ID, Tool: "Bash", Summary: "touch approved.txt"}, pending[0]); diff != "" || pending[0].ID <= 0 {
		t.Errorf("approval (-want +got):\n%s", diff)
	}
	if got := apiApprovalList(t, w.do("GET", "/api/tasks/"+apiItoa(other), apiToken, "")); len(got) != 0 {
		t.Errorf("the other task lists approvals %+v", got)
	}
	aid := apiItoa(pending[0].ID)

	for _, tc := range []struct {
		name     string
		task     int64
		approval string
		body     string
		status   int
		says     string
	}{
		{"unknown approval", id, "999999", `{"decision": "approve"}`, http.StatusNotFound, "has no approval"},
		{"not a number", id, "abc", `{"decision": "approve"}`, http.StatusNotFound, "has no approval"},
		{"another task's approval", other, aid, `{"decision": "approve"}`, http.StatusNotFound, "has no approval"},
		{"bad decision", id, aid, `{"decision": "maybe"}`, http.StatusBadRequest, `"approve", "deny" or "always"`},
		{"no decision", id, aid, `{}`, http.StatusBadRequest, `"approve", "deny" or "always"`},
		{"unknown field", id, aid, `{"decision": "approve", "reason": "x"}`, http.StatusBadRequest, "fields: decision, author"},
		{"not JSON", id, aid, `approve`, http.StatusBadRequest, "not a valid JSON request"},
		{"empty body", id, aid, ``, http.StatusBadRequest, "the body is empty"},
		{"not the requester", id, aid, `{"decision": "approve", "author": "mallory"}`, http.StatusForbidden, "Only the person who started this task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := apiApprovalDecide(w, tc.task, tc.approval, tc.body)
			if r.Status != tc.status || !strings.Contains(apiApprovalError(r), tc.says) {
				t.Errorf("status %d, body %s; want %d saying %q", r.Status, r.Raw, tc.status, tc.says)
			}
		})
	}
	ws := apiApprovalWorkspace(t, w, id)
	if _, err := os.Stat(filepath.Join(ws, "approved.txt")); err == nil {
		t.Fatal("the call ran before anyone approved it")
	}
	if v := w.get(id); v.Jobs[0].State != "waiting_approval" {
		t.Fatalf("after the refused requests the job is %s, want still waiting_approval", v.Jobs[0].State)
	}

	r := apiApprovalDecide(w, id, aid, `{"decision": "approve", "author": "alice"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("approve: status %d: %s", r.Status, r.Raw)
	}
	if got := apiApprovalList(t, r); len(got) != 0 {
		t.Errorf("after the decision the view still lists %+v", got)
	}
	v := w.waitJob(id, "succeeded")
	if v.Jobs[0].ResultSummary != "The file is made." {
		t.Errorf("result = %q", v.Jobs[0].ResultSummary)
	}
	if _, err := os.Stat(filepath.Join(ws, "approved.txt")); err != nil {
		t.Errorf("the approved call did not run: %v", err)
	}

	r = apiApprovalDecide(w, id, aid, `{"decision": "deny", "author": "alice"}`)
	if r.Status != http.StatusConflict || !strings.Contains(apiApprovalError(r), "decided already") {
		t.Errorf("second decision: status %d, body %s; want 409 with an error", r.Status, r.Raw)
	}
}

// TestAPIApprovalAbort: a job waiting for approval is active: the abort
// takes it.
func TestAPIApprovalAbort(t *testing.T) {
	w := apiApprovalWorld(t)
	w.llm.Script(llmtest.Call("Bash", `{"command":"touch approved.txt"}`))
	id := w.create(`{"text": "make the file"}`)
	w.waitJob(id, "waiting_approval")
	if r := w.do("POST", "/api/tasks/"+apiItoa(id)+"/abort", apiToken, ""); r.Status != http.StatusAccepted {
		t.Fatalf("abort: status %d: %s", r.Status, r.Raw)
	}
	w.waitJob(id, "aborted")
}

// apiApprovalWorkspace is task id's workspace.
func apiApprovalWorkspace(t testing.TB, w *apiWorld, id int64) string {
	t.Helper()
	task, err := w.store.Task(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return task.Workspace
}
