package api

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
)

// taskView is what the API answers about a task. It never shows the
// task's workspace: a server path is none of a client's business.
type taskView struct {
	Task     taskInfo      `json:"task"`
	Jobs     []jobView     `json:"jobs"`     // newest first
	Comments []commentView `json:"comments"` // the last ones, oldest first
	// Approvals are the task's calls waiting for a decision, oldest first
	// (POST /api/tasks/{id}/approvals/{approval} decides one).
	Approvals []approvalView `json:"approvals"`
	// Message is the conversation service's answer to the request, when
	// it has one (a command's answer, an abort's confirmation).
	Message string `json:"message,omitempty"`
}

type taskInfo struct {
	ID        int64     `json:"id"`
	Title     string    `json:"title"`
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
}

type jobView struct {
	ID               int64         `json:"id"`
	State            core.JobState `json:"state"`
	Piece            string        `json:"piece"`
	Movement         string        `json:"movement,omitempty"`
	MovementCount    int           `json:"movement_count"`
	Question         string        `json:"question,omitempty"`
	ResultSummary    string        `json:"result_summary,omitempty"`
	Error            string        `json:"error,omitempty"`
	PromptTokens     int64         `json:"prompt_tokens"`
	CompletionTokens int64         `json:"completion_tokens"`
	CreatedAt        time.Time     `json:"created_at"`
	FinishedAt       time.Time     `json:"finished_at,omitzero"`
}

type approvalView struct {
	ID      int64  `json:"id"`
	Tool    string `json:"tool"`
	Summary string `json:"summary"` // the command, path or arguments, clipped
}

// summaryRunes caps an approval's summary.
const summaryRunes = 200

type commentView struct {
	ID        int64     `json:"id"`
	Role      core.Role `json:"role"`
	Author    string    `json:"author,omitempty"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"created_at"`
}

// view reads the task's jobs and last comments.
func (a *API) view(ctx context.Context, task core.Task) (taskView, error) {
	jobs, err := a.store.Jobs(ctx, core.JobFilter{TaskID: task.ID, Limit: shownJobs})
	if err != nil {
		return taskView{}, fmt.Errorf("jobs of task %d: %w", task.ID, err)
	}
	comments, err := a.store.RecentComments(ctx, task.ID, shownComments)
	if err != nil {
		return taskView{}, fmt.Errorf("comments of task %d: %w", task.ID, err)
	}
	pending, err := a.store.PendingApprovals(ctx, task.ID)
	if err != nil {
		return taskView{}, fmt.Errorf("approvals of task %d: %w", task.ID, err)
	}
	v := taskView{
		Task: taskInfo{ID: task.ID, Title: scrub(task, task.Title), Owner: task.OwnerUser, CreatedAt: task.CreatedAt},
		Jobs: make([]jobView, 0, len(jobs)), Comments: make([]commentView, 0, len(comments)),
		Approvals: make([]approvalView, 0, len(pending)),
	}
	for _, p := range pending {
		v.Approvals = append(v.Approvals, approvalView{ID: p.ID, Tool: p.Tool, Summary: clip(scrub(task, p.Subject), summaryRunes)})
	}
	for _, j := range jobs {
		v.Jobs = append(v.Jobs, jobView{
			ID: j.ID, State: j.State, Piece: j.Piece, Movement: j.Movement, MovementCount: j.MovementCount,
			Question: scrub(task, j.Question), ResultSummary: scrub(task, j.ResultSummary), Error: scrub(task, j.Error),
			PromptTokens: j.PromptTokens, CompletionTokens: j.CompletionTokens, CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt,
		})
	}
	for _, c := range comments {
		who := c.AuthorID
		if who == "" {
			who = c.AuthorName
		}
		v.Comments = append(v.Comments, commentView{ID: c.ID, Role: c.Role, Author: who, Text: scrub(task, c.Text), CreatedAt: c.CreatedAt})
	}
	return v, nil
}

// clip cuts s to n runes.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// scrub hides the task's workspace in text the agent or a tool wrote:
// answers and errors may quote absolute paths, and the server's layout is
// not for clients.
func scrub(task core.Task, s string) string {
	ws := strings.TrimSuffix(task.Workspace, "/")
	if ws == "" || !strings.Contains(s, ws) {
		return s
	}
	return strings.ReplaceAll(s, ws, "<workspace>")
}
