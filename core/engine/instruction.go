package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/workspace"
)

// Limits of the enriched instruction (SPEC §7.1).
const (
	recentComments   = 5    // comments shown
	commentRunes     = 500  // per comment
	instructionRunes = 8000 // the request itself
	listedFiles      = 50   // per directory
)

// limits are the caps of the enriched instruction's parts: the note's
// (noteLimits), or shorter ones when a movement's first request does not
// fit the window.
type limits struct {
	comments         int // comments shown
	commentRunes     int // per comment
	instructionRunes int // the request itself
	previousRunes    int // the previous job's answer
	files            int // listed per directory
}

// noteLimits are the caps of SPEC §7.1.
var noteLimits = limits{
	comments: recentComments, commentRunes: commentRunes, instructionRunes: instructionRunes,
	previousRunes: previousAnswerRunes, files: listedFiles,
}

// maxShrink is how many times a first request that does not fit may be
// rebuilt with its caps halved: at the last, the request keeps 500
// characters and the comments 31.
const maxShrink = 4

// shrunk returns l with each cap halved k times, keeping at least one
// comment and a few listed files.
func (l limits) shrunk(k int) limits {
	d := 1 << k
	return limits{
		comments: max(l.comments/d, 1), commentRunes: max(l.commentRunes/d, 20), instructionRunes: max(l.instructionRunes/d, 200),
		previousRunes: max(l.previousRunes/d, 100), files: max(l.files/d, 3),
	}
}

type commentLine struct{ At, Who, Text string }

type fileLine struct{ Name, Size string }

type dirLine struct {
	Name  string
	Files []fileLine
	More  int
}

type instructionData struct {
	Now            string
	Comments       []commentLine
	CommentLimit   int
	PreviousAnswer string
	Dirs           []dirLine
	Instruction    string
}

// previousAnswerRunes caps the previous job's answer given to the next job
// of the task (beyond the note: the last comments alone would hold only
// its first 500 characters).
const previousAnswerRunes = 2000

// enriched builds the job's first user prompt material: the date and time,
// the last five comments of the task (people's messages and the bot's
// questions and answers, not `!` commands nor the comment that is this job's
// request), the input/ and output/ listings, and the request. Nothing else:
// older comments, earlier movements and logs/ stay out. lim caps the parts.
func (e *Engine) enriched(ctx context.Context, task core.Task, j core.Job, ws *workspace.Workspace, lim limits) (string, error) {
	now := e.cfg.Now().In(e.cfg.Location)
	data := instructionData{Now: e.formatNow(now), CommentLimit: lim.commentRunes}

	// Fetch more than five: commands and the request itself are skipped.
	recent, err := e.store.RecentComments(ctx, task.ID, 4*recentComments)
	if err != nil {
		return "", fmt.Errorf("recent comments of task %d: %w", task.ID, err)
	}
	request := strings.TrimSpace(j.Instruction)
	skippedRequest := false
	var kept []core.Comment
	for i := len(recent) - 1; i >= 0 && len(kept) < lim.comments; i-- {
		c := recent[i]
		text := strings.TrimSpace(c.Text)
		if c.Role == core.RoleUser && strings.HasPrefix(text, "!") {
			continue
		}
		if !skippedRequest && c.Role == core.RoleUser && text == request {
			skippedRequest = true
			continue
		}
		kept = append(kept, c)
	}
	for i := len(kept) - 1; i >= 0; i-- {
		c := kept[i]
		who := c.AuthorName
		if who == "" {
			who = c.AuthorID
		}
		if c.Role == core.RoleBot {
			who = e.text.msg("bot_label")
		}
		data.Comments = append(data.Comments, commentLine{
			At:   c.CreatedAt.In(e.cfg.Location).Format("2006-01-02 15:04"),
			Who:  who,
			Text: e.cut(c.Text, lim.commentRunes),
		})
	}

	prev, err := e.store.Jobs(ctx, core.JobFilter{TaskID: task.ID, States: []core.JobState{core.JobSucceeded}, Limit: 1})
	if err != nil {
		return "", fmt.Errorf("previous jobs of task %d: %w", task.ID, err)
	}
	if len(prev) > 0 && prev[0].ID != j.ID && strings.TrimSpace(prev[0].ResultSummary) != "" {
		data.PreviousAnswer = e.cut(prev[0].ResultSummary, lim.previousRunes)
	}

	for _, dir := range []string{"input", "output"} {
		files, more, err := ws.Files(dir, lim.files)
		if errors.Is(err, workspace.ErrOutside) {
			// The agent replaced the folder with a link out; its tools say
			// so when used, and the job goes on.
			e.cfg.Logger.Warn("a workspace folder is a link out; listed as empty", "task", task.ID, "folder", dir)
		} else if err != nil {
			return "", fmt.Errorf("list %s/: %w", dir, err)
		}
		d := dirLine{Name: dir, More: more}
		for _, f := range files {
			d.Files = append(d.Files, fileLine{Name: f.Name, Size: humanSize(f.Size)})
		}
		data.Dirs = append(data.Dirs, d)
	}

	data.Instruction, err = e.request(j, ws, lim.instructionRunes)
	if err != nil {
		return "", err
	}
	return execute(e.text.instruction, data)
}

// request returns the job's instruction, cut at limit runes with the
// full text saved to input/ (or said to be unsaved when input/ is not a
// folder of the workspace).
func (e *Engine) request(j core.Job, ws *workspace.Workspace, limit int) (string, error) {
	text := strings.ToValidUTF8(j.Instruction, "\uFFFD")
	n := utf8.RuneCountInString(text)
	if n <= limit {
		return text, nil
	}
	rel := fmt.Sprintf("input/request-%d.txt", j.ID)
	if err := ws.Prepare(); err != nil {
		return "", err
	}
	if err := ws.WriteFile(rel, []byte(text)); errors.Is(err, workspace.ErrOutside) {
		// input/ was replaced with a link out: the job goes on with the cut.
		e.cfg.Logger.Warn("the full request cannot be saved", "job", j.ID, "err", err)
		return prefixRunes(text, limit) + e.text.fill("instruction_cut_unsaved", map[string]string{
			"limit": strconv.Itoa(limit), "n": strconv.Itoa(n),
		}), nil
	} else if err != nil {
		return "", fmt.Errorf("save the full request: %w", err)
	}
	return prefixRunes(text, limit) + e.text.fill("instruction_cut", map[string]string{
		"limit": strconv.Itoa(limit), "n": strconv.Itoa(n), "path": rel,
	}), nil
}

// cut returns s cut to limit runes, marked when cut. Invalid UTF-8 is
// replaced so that the prompt stays valid.
func (e *Engine) cut(s string, limit int) string {
	s = strings.ToValidUTF8(strings.TrimSpace(s), "\uFFFD")
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	return prefixRunes(s, limit) + e.text.fill("comment_cut", map[string]string{"n": strconv.Itoa(n - limit)})
}

// prefixRunes returns the first n runes of s.
func prefixRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

func (e *Engine) formatNow(t time.Time) string {
	_, off := t.Zone()
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	zone := fmt.Sprintf("UTC%s%02d:%02d", sign, off/3600, off%3600/60)
	if e.cfg.Locale == "ja" {
		wd := [...]string{"日", "月", "火", "水", "木", "金", "土"}[t.Weekday()]
		return fmt.Sprintf("%s（%s曜日）タイムゾーン %s（%s）", t.Format("2006-01-02 15:04"), wd, t.Location(), zone)
	}
	return fmt.Sprintf("%s (%s), time zone %s (%s)", t.Format("2006-01-02 15:04"), t.Weekday(), t.Location(), zone)
}

// humanSize formats a byte count.
func humanSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	case n < 1024*1024*1024:
		return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
	default:
		return fmt.Sprintf("%.1f GB", float64(n)/(1024*1024*1024))
	}
}

// groupDigits formats n with a comma between groups of three digits
// (128,000), as the failure reasons people read show token counts.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
