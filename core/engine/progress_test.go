package engine

import (
	"strings"
	"testing"
)

func TestToolTitle(t *testing.T) {
	for _, c := range []struct{ tool, args, want string }{
		{"Read", `{"path":"core/job.go"}`, "Read core/job.go"},
		{"Bash", `{"command":"go test ./...\necho more"}`, "Bash: go test ./..."},
		{"Glob", `{"pattern":"**/*.go"}`, "Glob: **/*.go"},
		{"Checklist", `{}`, "Checklist"},
	} {
		if got := ToolTitle(c.tool, c.args); got != c.want {
			t.Errorf("ToolTitle(%s, %s) = %q, want %q", c.tool, c.args, got, c.want)
		}
	}
	long := ToolTitle("Bash", `{"command":"echo `+strings.Repeat("a", 200)+`"}`)
	if n := len([]rune(long)); n > titleLimit {
		t.Errorf("a long title has %d characters, want at most %d", n, titleLimit)
	}
}
