package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/piece"
)

// transitionTool is the name of the tool that ends a movement.
const transitionTool = "transition"

// maxSubtasks bounds WAIT_SUBTASKS.
const maxSubtasks = 10

// subtask is one child job asked for with WAIT_SUBTASKS.
type subtask struct {
	Title       string `json:"title"`
	Instruction string `json:"instruction"`
	Piece       string `json:"piece,omitempty"`
}

// outcome is how a movement ended.
type outcome struct {
	Next     string
	Summary  string
	Lessons  string
	Question string
	Subtasks []subtask
	Forced   string // why the engine forced the transition; "" when chosen
	park     *park  // with Next == waitApproval: the call waiting for a person
}

type transitionArgs struct {
	NextStep string    `json:"next_step"`
	Summary  string    `json:"summary"`
	Lessons  string    `json:"lessons"`
	Question string    `json:"question"`
	Subtasks []subtask `json:"subtasks"`
}

// transitionDef returns the transition tool offered in a movement whose
// allowed next steps are next, described in tx's locale.
func transitionDef(tx *catalog.Texts, next []string) llm.ToolDef {
	desc := func(name string) string { return tx.Text("tools.transition.param." + name) }
	props := map[string]any{
		"next_step": map[string]any{"type": "string", "enum": next, "description": desc("next_step")},
		"summary":   map[string]any{"type": "string", "description": desc("summary")},
		"lessons":   map[string]any{"type": "string", "description": desc("lessons")},
	}
	if contains(next, piece.Ask) {
		props["question"] = map[string]any{"type": "string", "description": desc("question")}
	}
	if contains(next, piece.WaitSubtasks) {
		props["subtasks"] = map[string]any{
			"type": "array", "maxItems": maxSubtasks,
			"description": desc("subtasks"),
			"items": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"title":       map[string]any{"type": "string"},
					"instruction": map[string]any{"type": "string", "description": desc("subtask_instruction")},
					"piece":       map[string]any{"type": "string", "description": desc("subtask_piece")},
				},
				"required": []string{"title", "instruction"},
			},
		}
	}
	schema, _ := json.Marshal(map[string]any{
		"type": "object", "properties": props, "required": []string{"next_step", "summary"},
	})
	return llm.ToolDef{
		Name:        transitionTool,
		Description: tx.Text("tools.transition.description"),
		Parameters:  schema,
	}
}

// parseTransition validates a transition call. It returns the outcome, or
// the text of the error result sent back to the model.
func (pr *pieceRun) parseTransition(raw string, next []string) (outcome, string) {
	var a transitionArgs
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return outcome{}, pr.e.text.fill("bad_arguments", map[string]string{"err": err.Error()})
	}
	a.NextStep = strings.TrimSpace(a.NextStep)
	if !contains(next, a.NextStep) {
		return outcome{}, pr.e.text.fill("transition_invalid_step", map[string]string{
			"got": strconv.Quote(a.NextStep), "allowed": strings.Join(next, ", "),
		})
	}
	if strings.TrimSpace(a.Summary) == "" {
		return outcome{}, pr.e.text.msg("transition_no_summary")
	}
	if a.NextStep == piece.Ask && strings.TrimSpace(a.Question) == "" {
		return outcome{}, pr.e.text.msg("transition_no_question")
	}
	if a.NextStep == piece.WaitSubtasks {
		if len(a.Subtasks) == 0 || len(a.Subtasks) > maxSubtasks {
			return outcome{}, pr.e.text.msg("transition_no_subtasks")
		}
		for i, s := range a.Subtasks {
			if strings.TrimSpace(s.Title) == "" || strings.TrimSpace(s.Instruction) == "" {
				return outcome{}, pr.e.text.msg("transition_no_subtasks")
			}
			if s.Piece != "" {
				if _, ok := pr.e.pieces.Lookup(s.Piece); !ok {
					return outcome{}, pr.e.text.fill("transition_bad_piece", map[string]string{
						"i": strconv.Itoa(i + 1), "piece": strconv.Quote(s.Piece), "pieces": strings.Join(pr.e.pieceNames(), ", "),
					})
				}
			}
		}
	} else {
		a.Subtasks = nil
	}
	if a.NextStep != piece.Ask {
		a.Question = ""
	}
	return outcome{Next: a.NextStep, Summary: a.Summary, Lessons: a.Lessons, Question: a.Question, Subtasks: a.Subtasks}, ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// pieceNames lists the pieces when the library can tell.
func (e *Engine) pieceNames() []string {
	if n, ok := e.pieces.(interface{ Names() []string }); ok {
		return n.Names()
	}
	return nil
}

// forcedSummary marks the last assistant text with why the transition was
// forced.
func forcedSummary(lastText, reason string) string {
	lastText = strings.TrimSpace(lastText)
	if lastText == "" {
		return fmt.Sprintf("(%s)", reason)
	}
	return fmt.Sprintf("%s\n\n(%s)", lastText, reason)
}
