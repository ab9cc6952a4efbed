package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
)

// Paging of GET /api/tasks.
const (
	defaultPage = 20
	maxPage     = 100
)

// taskList is the answer of GET /api/tasks: a page of the API's tasks,
// newest first.
type taskList struct {
	Tasks []taskSummary `json:"tasks"`
	// NextCursor, when set, asks for the next page (?cursor=…); absent on
	// the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// taskSummary is one task of a listing, with its newest job's state.
type taskSummary struct {
	ID        int64     `json:"id"`
	Title     string    `json:"title"`
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// State and Piece are the newest job's; absent for a task without one.
	State core.JobState `json:"state,omitempty"`
	Piece string        `json:"piece,omitempty"`
	JobID int64         `json:"job_id,omitempty"`
}

// listParams are the query parameters GET /api/tasks knows.
const listParams = "limit, cursor, state, since"

// list answers GET /api/tasks: the API's tasks, newest first, a page of
// ?limit= (default 20, at most 100) after ?cursor= (the previous page's
// next_cursor), filtered by ?state= (the newest job's) and ?since= (created
// at or after, RFC 3339). Anything else in the query is refused with 400.
func (a *API) list(w http.ResponseWriter, r *http.Request) {
	f := core.TaskFilter{Platform: core.PlatformAPI, Limit: defaultPage}
	q := r.URL.Query()
	for key, vals := range q {
		if len(vals) != 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Give %s once.", key))
			return
		}
		v := vals[0]
		switch key {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxPage {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be a number from 1 to %d.", maxPage))
				return
			}
			f.Limit = n
		case "cursor":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				writeError(w, http.StatusBadRequest, "cursor must be a next_cursor this API gave.")
				return
			}
			f.Before = n
		case "state":
			st := core.JobState(v)
			if !st.Valid() {
				writeError(w, http.StatusBadRequest, "state must be one of "+states()+".")
				return
			}
			f.State = st
		case "since":
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				writeError(w, http.StatusBadRequest, "since must be an RFC 3339 time, such as 2025-03-01T12:00:00Z.")
				return
			}
			f.Since = t
		default:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Unknown query parameter %q (parameters: %s).", key, listParams))
			return
		}
	}
	page := f.Limit
	f.Limit++ // one more tells whether a next page exists
	ctx := r.Context()
	tasks, err := a.store.Tasks(ctx, f)
	if err != nil {
		a.fail(w, r, "list tasks", err)
		return
	}
	out := taskList{Tasks: make([]taskSummary, 0, min(len(tasks), page))}
	if len(tasks) > page {
		tasks = tasks[:page]
		out.NextCursor = strconv.FormatInt(tasks[page-1].ID, 10)
	}
	for _, t := range tasks {
		s := taskSummary{ID: t.ID, Title: scrub(t, t.Title), Owner: t.OwnerUser, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
		jobs, err := a.store.Jobs(ctx, core.JobFilter{TaskID: t.ID, Limit: 1})
		if err != nil {
			a.fail(w, r, "list tasks", err)
			return
		}
		if len(jobs) > 0 {
			s.State, s.Piece, s.JobID = jobs[0].State, jobs[0].Piece, jobs[0].ID
		}
		out.Tasks = append(out.Tasks, s)
	}
	writeJSON(w, http.StatusOK, out)
}

// states lists the job states, for an error.
func states() string {
	names := make([]string, len(core.JobStates))
	for i, s := range core.JobStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
