package engine

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/policy"
)

// Progresser is an Observer that is also told a running job's typed
// progress events (core.ProgressEvent) as they happen; the engine finds it
// by type assertion on Config.Observer. Events of one job come in order;
// Progress must return quickly and never wait for a delivery.
type Progresser interface {
	Progress(ctx context.Context, ev core.ProgressEvent)
}

// titleLimit bounds a tool call's title, in characters.
const titleLimit = 80

// ToolTitle is a tool call's one-line title: "Read core/job.go",
// "Bash: go test ./...", the tool's name and its subject otherwise.
func ToolTitle(tool, args string) string {
	subject := policy.Subject(tool, args)
	if subject == args {
		subject = mainArgument(args)
	}
	subject, _, _ = strings.Cut(strings.TrimSpace(subject), "\n")
	sep := ": "
	switch tool {
	case "Read", "Write", "Edit":
		sep = " "
	}
	if subject == "" || subject == "{}" {
		return tool
	}
	return clipRunes(tool+sep+subject, titleLimit-1) // the ellipsis makes titleLimit
}

// titleFields are the arguments that say what a call is about, in order
// of preference, for the tools policy.Subject does not know.
var titleFields = []string{"pattern", "path", "url", "query", "name"}

// mainArgument is the first of titleFields that args has as a string, or
// args itself.
func mainArgument(args string) string {
	var m map[string]any
	if json.Unmarshal([]byte(args), &m) != nil {
		return args
	}
	for _, f := range titleFields {
		if v, ok := m[f].(string); ok && v != "" {
			return v
		}
	}
	return args
}

// progress tells the observer, when it is a Progresser, ev; the job, the
// movement, its plan position and the time are filled in.
func (pr *pieceRun) progress(ctx context.Context, ev core.ProgressEvent) {
	p, ok := pr.e.cfg.Observer.(Progresser)
	if !ok {
		return
	}
	pr.mu.Lock()
	ev.JobID, ev.TaskID = pr.job.ID, pr.task.ID
	if ev.Movement == "" {
		ev.Movement = pr.movement
	}
	pr.mu.Unlock()
	for i, m := range pr.piece.Movements {
		ev.Plan = append(ev.Plan, m.Name)
		if m.Name == ev.Movement {
			ev.Position = i + 1
		}
	}
	ev.At = pr.e.cfg.Now()
	p.Progress(ctx, ev)
}

// textHooks are a request's hooks for a streamed completion's text
// (llm.Request.OnText, OnRestart): each delta of the answer becomes a text
// progress event when an observer takes progress, and goes to Config.OnText.
// A restart (the request retried) reaches Config.OnTextRestart only: the
// live view keeps the text it was shown. Both are nil when nobody
// listens.
func (pr *pieceRun) textHooks(ctx context.Context) (onText func(delta string), onRestart func()) {
	_, progress := pr.e.cfg.Observer.(Progresser)
	hook, restart, id := pr.e.cfg.OnText, pr.e.cfg.OnTextRestart, pr.job.ID
	if progress || hook != nil {
		onText = func(delta string) {
			if delta == "" {
				return
			}
			if progress {
				pr.progress(ctx, core.ProgressEvent{Kind: core.ProgressText, Text: delta})
			}
			if hook != nil {
				hook(id, delta)
			}
		}
	}
	if restart != nil {
		onRestart = func() { restart(id) }
	}
	return onText, onRestart
}
