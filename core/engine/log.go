package engine

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/baton-bot/baton/core/llm"
)

// loggedMessage is a message as written to a movement's log: images are
// replaced with their size so the log stays text.
type loggedMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content,omitempty"`
	Parts      []string       `json:"parts,omitempty"`
	ToolCalls  []llm.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
}

// writeMovementLog writes a movement's messages to
// logs/movements/job<id>-<n>-<movement>.jsonl, capped at MovementLogBytes,
// for debugging. It is never read back into a prompt.
func (pr *pieceRun) writeMovementLog(movement string, msgs []llm.Message) {
	pr.writeLog(fmt.Sprintf("job%d-%02d-%s.jsonl", pr.job.ID, pr.job.MovementCount+1, movement), msgs)
}

// writeLog writes msgs to logs/movements/name, capped at
// MovementLogBytes, and returns its path in the workspace.
func (pr *pieceRun) writeLog(name string, msgs []llm.Message) string {
	rel := "logs/movements/" + name
	f, err := pr.ws.OpenLog(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		pr.log.Warn("movement log", "err", err)
		return rel
	}
	defer f.Close()
	limit := pr.e.cfg.MovementLogBytes
	var written int64
	for _, m := range msgs {
		lm := loggedMessage{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, p := range m.Parts {
			if p.Type == llm.PartImage {
				lm.Parts = append(lm.Parts, fmt.Sprintf("[image %s, %d bytes]", p.ImageMIME, len(p.ImageData)))
			} else {
				lm.Parts = append(lm.Parts, p.Text)
			}
		}
		line, _ := json.Marshal(lm)
		line = append(line, '\n')
		if written+int64(len(line)) > limit {
			fmt.Fprintf(f, "{\"note\":\"log cut at %d bytes\"}\n", limit)
			return rel
		}
		n, _ := f.Write(line)
		written += int64(n)
	}
	return rel
}
