package core

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"
)

// Usage is what one model request used: its tokens and their cost, with
// who and what it was for. Rows outlive their tasks and jobs (nothing
// refers to them), so that reports still sum when a task is gone.
type Usage struct {
	ID        int64
	JobID     int64
	TaskID    int64
	Channel   string // platform-qualified channel of the task ("slack:C1")
	Requester string // platform-qualified id of the task's requester
	Model     string
	// Day is the UTC day of the request, YYYY-MM-DD: what daily budgets
	// and reports group by.
	Day              string
	PromptTokens     int64 // all of the prompt, cached included
	CachedTokens     int64 // the part of PromptTokens served from the provider's cache
	CompletionTokens int64
	Cost             float64 // dollars, by the configured prices; 0 without a price
	At               time.Time
}

// Tokens is the prompt and completion tokens of u.
func (u Usage) Tokens() int64 { return u.PromptTokens + u.CompletionTokens }

// UsageDay is the Day of a request made at t.
func UsageDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// UsageFilter selects usage rows. Zero fields do not filter.
type UsageFilter struct {
	JobID     int64
	TaskID    int64
	Channel   string
	Requester string
	// FromDay and ToDay bound Day, both included (YYYY-MM-DD).
	FromDay string
	ToDay   string
}

// UsageSum is the total of usage rows.
type UsageSum struct {
	Requests         int64
	PromptTokens     int64
	CachedTokens     int64
	CompletionTokens int64
	Cost             float64
}

// Tokens is the prompt and completion tokens of s.
func (s UsageSum) Tokens() int64 { return s.PromptTokens + s.CompletionTokens }

// Add adds u to s.
func (s *UsageSum) Add(u Usage) {
	s.Requests++
	s.PromptTokens += u.PromptTokens
	s.CachedTokens += u.CachedTokens
	s.CompletionTokens += u.CompletionTokens
	s.Cost += u.Cost
}

// UsageStore keeps the usage of model requests.
type UsageStore interface {
	// AddUsage stores u (its ID set by the store; At, when zero, is the
	// store's now, and Day, when empty, At's day).
	AddUsage(ctx context.Context, u Usage) error
	// Usage returns the rows matching f, oldest first.
	Usage(ctx context.Context, f UsageFilter) ([]Usage, error)
	// SumUsage returns the total of the rows matching f.
	SumUsage(ctx context.Context, f UsageFilter) (UsageSum, error)
}

// What a job waiting in waiting_human waits for (Job.WaitKind), when the
// engine asked rather than the piece.
const (
	// WaitBudget: a budget would be passed by the next model request.
	WaitBudget = "budget"
	// WaitGuard: a loop guard found the agent going round in circles.
	WaitGuard = "guard"
)

// ParseContinue reads an answer to a budget or guard question: "continue"
// (ok, no amount given) or "continue N" with N a positive number (dollars
// for a cost budget, tokens for a token budget). ok is false for anything
// else, "continue abc" and "continue -1" included.
func ParseContinue(text string) (amount float64, given, ok bool) {
	f := strings.Fields(strings.ToLower(strings.TrimSpace(text)))
	if len(f) == 0 || f[0] != "continue" || len(f) > 2 {
		return 0, false, false
	}
	if len(f) == 1 {
		return 0, false, true
	}
	n, err := strconv.ParseFloat(strings.TrimPrefix(f[1], "$"), 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, false, false
	}
	return n, true, true
}

// IsContinue reports whether text is meant as a `continue` answer, well
// formed or not: its first word is "continue".
func IsContinue(text string) bool {
	f := strings.Fields(strings.ToLower(text))
	return len(f) > 0 && f[0] == "continue"
}

// UsageReport is usage rows summed in total and by channel, requester,
// model, day and task (its ID in decimal).
type UsageReport struct {
	Total       UsageSum            `json:"total"`
	ByChannel   map[string]UsageSum `json:"by_channel"`
	ByRequester map[string]UsageSum `json:"by_user"`
	ByModel     map[string]UsageSum `json:"by_model"`
	ByDay       map[string]UsageSum `json:"by_day"`
	ByTask      map[string]UsageSum `json:"by_task"`
}

// ReportUsage sums rows into a report. Rows of tasks that are gone count
// as any other.
func ReportUsage(rows []Usage) UsageReport {
	r := UsageReport{ByChannel: map[string]UsageSum{}, ByRequester: map[string]UsageSum{}, ByModel: map[string]UsageSum{},
		ByDay: map[string]UsageSum{}, ByTask: map[string]UsageSum{}}
	add := func(m map[string]UsageSum, k string, u Usage) {
		s := m[k]
		s.Add(u)
		m[k] = s
	}
	for _, u := range rows {
		r.Total.Add(u)
		add(r.ByChannel, u.Channel, u)
		add(r.ByRequester, u.Requester, u)
		add(r.ByModel, u.Model, u)
		add(r.ByDay, u.Day, u)
		add(r.ByTask, strconv.FormatInt(u.TaskID, 10), u)
	}
	return r
}

// UsagePeriod returns the days of a report period ending on today's UTC
// day: "today", "week" (the last 7 days), "month" (the last 30) or "all"
// (no bound: both empty). ok is false for any other name.
func UsagePeriod(name string, now time.Time) (from, to string, ok bool) {
	day := now.UTC()
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "today":
		return UsageDay(day), UsageDay(day), true
	case "week":
		return UsageDay(day.AddDate(0, 0, -6)), UsageDay(day), true
	case "month":
		return UsageDay(day.AddDate(0, 0, -29)), UsageDay(day), true
	case "all":
		return "", "", true
	}
	return "", "", false
}
