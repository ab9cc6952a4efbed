package engine

import (
	"bufio"
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

// writeMovementLog writes every message of a movement, in order, to
// logs/movements/job<id>-<n>-<movement>.jsonl, capped at MovementLogBytes,
// for debugging. It is never read back into a prompt.
func (pr *pieceRun) writeMovementLog(movement string, msgs []llm.Message) {
	pr.writeLog(movement, fmt.Sprintf("job%d-%02d-%s.jsonl", pr.job.ID, pr.job.MovementCount+1, movement), msgs)
}

// writeLog writes msgs of movement to logs/movements/name, capped at
// MovementLogBytes, and returns its path in the workspace. A log that
// cannot be written does not stop the job: the error is logged with the
// job and the movement.
func (pr *pieceRun) writeLog(movement, name string, msgs []llm.Message) string {
	rel := "logs/movements/" + name
	if err := pr.writeLogFile(name, msgs); err != nil {
		pr.log.Warn("writing a movement log failed", "movement", movement, "log", rel, "err", err)
	}
	return rel
}

func (pr *pieceRun) writeLogFile(name string, msgs []llm.Message) (err error) {
	f, err := pr.ws.OpenLog("logs/movements/"+name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := bufio.NewWriter(f)
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
		line, err := json.Marshal(lm)
		if err != nil {
			return err
		}
		line = append(line, '\n')
		if written+int64(len(line)) > limit {
			fmt.Fprintf(w, "{\"note\":\"log cut at %d bytes\"}\n", limit)
			break
		}
		n, err := w.Write(line)
		if err != nil {
			return err
		}
		written += int64(n)
	}
	return w.Flush()
}
