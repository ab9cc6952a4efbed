package console

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/baton-bot/baton/core/engine"
)

// preferred are the argument names that say most about a call, first
// shown when a tool's subject is its JSON arguments.
var preferred = []string{"pattern", "query", "url", "path", "name"}

// StepLine is the one line that shows the tool call s: "Read core/job.go",
// "Bash: go test ./...", "Glob **/*.go" — the tool, then what the call is
// about (Step.Subject; for tools whose subject is their JSON arguments,
// the string values of those, the telling ones first). It is one line,
// not cut to a width.
func StepLine(s engine.Step) string {
	subject := oneLine(s.Subject)
	switch s.Tool {
	case "Bash":
		return "Bash: " + subject
	case "Read", "Write", "Edit":
		return s.Tool + " " + subject
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(s.Subject), &args); err != nil {
		return strings.TrimSpace(s.Tool + " " + subject)
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		ia, ib := slices.Index(preferred, a), slices.Index(preferred, b)
		if ia < 0 {
			ia = len(preferred)
		}
		if ib < 0 {
			ib = len(preferred)
		}
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(a, b)
	})
	parts := []string{s.Tool}
	for _, k := range keys {
		if v, ok := args[k].(string); ok && v != "" {
			parts = append(parts, oneLine(v))
		}
	}
	return strings.Join(parts, " ")
}
