package piece_test

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core/piece"
)

// tools is the set of tool names Baton knows.
var tools = map[string]bool{
	"Read": true, "Write": true, "Edit": true, "Glob": true, "Grep": true,
	"Bash": true, "ReadImage": true, "ReadDocument": true, "Checklist": true,
}

func knownTool(name string) bool { return tools[name] }

// errList returns the messages of the errors joined in err.
func errList(tb testing.TB, err error) []string {
	tb.Helper()
	if err == nil {
		return nil
	}
	var out []string
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []string{err.Error()}
	}
	for _, e := range j.Unwrap() {
		var pe *piece.Error
		if !errors.As(e, &pe) {
			tb.Errorf("error %v is a %T, want *piece.Error", e, e)
		}
		out = append(out, e.Error())
	}
	return out
}

// mustParse parses src as dir/p.yaml inside files.
func mustParse(tb testing.TB, src string, files fstest.MapFS) *piece.Piece {
	tb.Helper()
	pc, err := piece.Parse([]byte(src), "pieces/p.yaml", files, piece.Rules{KnownTool: knownTool})
	if err != nil {
		tb.Fatalf("Parse: %v", err)
	}
	return pc
}

func TestTextFor(t *testing.T) {
	tests := []struct {
		name   string
		text   piece.Text
		locale string
		want   string
	}{
		{"exact", piece.Text{"en": "hello", "ja": "こんにちは"}, "ja", "こんにちは"},
		{"falls back to en", piece.Text{"en": "hello"}, "ja", "hello"},
		{"falls back to any", piece.Text{"ja": "こんにちは"}, "en", "こんにちは"},
		{"empty", nil, "en", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.text.For(tt.locale); got != tt.want {
				t.Errorf("For(%q) = %q, want %q", tt.locale, got, tt.want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	m := piece.Movement{Name: "plan", Instruction: piece.Text{
		"en": "Plan {task} in {movement} ({movement_count}/{max_movements}), call {iteration}; keep {unknown} and {task",
		"ja": "{task} の計画（{movement_count}/{max_movements}）",
	}}
	v := piece.Vars{Task: "the {iteration} report", MovementCount: 2, MaxMovements: 10, Iteration: 7}
	tests := []struct {
		locale, want string
	}{
		{"en", "Plan the {iteration} report in plan (2/10), call 7; keep {unknown} and {task"},
		{"ja", "the {iteration} report の計画（2/10）"},
		{"fr", "Plan the {iteration} report in plan (2/10), call 7; keep {unknown} and {task"},
	}
	for _, tt := range tests {
		t.Run(tt.locale, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, m.Render(tt.locale, v)); diff != "" {
				t.Errorf("Render (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMovementHelpers(t *testing.T) {
	m := piece.Movement{Next: []string{"verify", piece.Ask}}
	if !m.Allows("verify") || !m.Allows(piece.Ask) || m.Allows(piece.Complete) {
		t.Errorf("Allows disagrees with Next %v", m.Next)
	}
	if got := m.ForcedNext(); got != piece.Abort {
		t.Errorf("ForcedNext without default_next = %q, want ABORT", got)
	}
	m.DefaultNext = "verify"
	if got := m.ForcedNext(); got != "verify" {
		t.Errorf("ForcedNext = %q, want verify", got)
	}
	for _, s := range []string{"COMPLETE", "ASK", "ABORT", "WAIT_SUBTASKS"} {
		if !piece.IsSentinel(s) {
			t.Errorf("IsSentinel(%q) = false", s)
		}
	}
	if piece.IsSentinel("complete") {
		t.Errorf("IsSentinel is case-insensitive; sentinels are upper case")
	}
}
