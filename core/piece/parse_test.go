package piece_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core/piece"
)

func TestParseFull(t *testing.T) {
	files := fstest.MapFS{
		"personas/planner.md":    {Data: []byte("You plan.\n")},
		"personas/planner.ja.md": {Data: []byte("計画を立てます。\n")},
		"personas/checker.md":    {Data: []byte("You check.")},
		"pieces/local.md":        {Data: []byte("Local persona.")},
	}
	src := `name: demo
description:
  en: Demo piece
  ja: デモ
initial_movement: plan
max_movements: 7
personas:
  planner: ../personas/planner.md
  inline: You are terse and exact.
  bylocale:
    en: Speak English.
    ja: 日本語で話す。
movements:
  - name: plan
    persona: planner
    instruction: "Plan: {task}"
    tools: [Read, Glob]
    next: [work, ASK]
    default_next: work
    max_iterations: 5
    model: small
  - name: work
    persona: bylocale
    tools: [Bash]
    next: [check, ABORT]
    network: true
  - name: check
    persona: ../personas/checker.md
    next: [COMPLETE, work]
    default_next: COMPLETE
    verify: true
    git_context: true
  - name: side
    persona: local.md
    next: [COMPLETE]
  - name: inline
    persona: You review the work, line by line.
    next: [side]
  - name: mixed
    persona:
      en: inline
      ja: 日本語のペルソナ。
    next: [inline, plan]
`
	// side, inline and mixed would be unreachable: route check to them.
	src = strings.Replace(src, "next: [COMPLETE, work]", "next: [COMPLETE, work, mixed]", 1)
	pc := mustParse(t, src, files)
	want := &piece.Piece{
		Name:            "demo",
		Description:     piece.Text{"en": "Demo piece", "ja": "デモ"},
		InitialMovement: "plan",
		MaxMovements:    7,
		Source:          "pieces/p.yaml",
		Movements: []piece.Movement{
			{
				Name: "plan", Persona: piece.Text{"en": "You plan.", "ja": "計画を立てます。"},
				Instruction: piece.Text{"en": "Plan: {task}"}, Tools: []string{"Read", "Glob"},
				Next: []string{"work", "ASK"}, DefaultNext: "work", MaxIterations: 5, Model: "small",
			},
			{
				Name: "work", Persona: piece.Text{"en": "Speak English.", "ja": "日本語で話す。"},
				Tools: []string{"Bash"}, Next: []string{"check", "ABORT"}, MaxIterations: 30, Network: true,
			},
			{
				Name: "check", Persona: piece.Text{"en": "You check."},
				Next: []string{"COMPLETE", "work", "mixed"}, DefaultNext: "COMPLETE", MaxIterations: 30,
				Verify: true, GitContext: true,
			},
			{Name: "side", Persona: piece.Text{"en": "Local persona."}, Next: []string{"COMPLETE"}, MaxIterations: 30},
			{Name: "inline", Persona: piece.Text{"en": "You review the work, line by line."}, Next: []string{"side"}, MaxIterations: 30},
			{
				Name: "mixed", Persona: piece.Text{"en": "You are terse and exact.", "ja": "日本語のペルソナ。"},
				Next: []string{"inline", "plan"}, MaxIterations: 30,
			},
		},
	}
	if diff := cmp.Diff(want, pc); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if m, ok := pc.Movement("check"); !ok || !m.Verify {
		t.Errorf("Movement(check) = %+v, %v", m, ok)
	}
	if _, ok := pc.Movement("nope"); ok {
		t.Errorf("Movement(nope) found")
	}
}

func TestParseDefaults(t *testing.T) {
	pc := mustParse(t, "name: tiny\nmovements:\n  - name: only\n    next: [COMPLETE]\n", nil)
	if pc.InitialMovement != "only" || pc.MaxMovements != 10 || pc.Movements[0].MaxIterations != 30 {
		t.Errorf("defaults: initial %q, max_movements %d, max_iterations %d; want only, 10, 30",
			pc.InitialMovement, pc.MaxMovements, pc.Movements[0].MaxIterations)
	}
	if pc.Movements[0].Persona != nil || pc.Movements[0].DefaultNext != "" {
		t.Errorf("absent persona/default_next = %v/%q, want empty", pc.Movements[0].Persona, pc.Movements[0].DefaultNext)
	}
}

// TestParseErrors checks each validation rule: the message, the line and the
// offending name.
func TestParseErrors(t *testing.T) {
	files := fstest.MapFS{"personas/ok.md": {Data: []byte("Fine.")}, "personas/empty.md": {Data: []byte("\n")}}
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "unknown top-level field",
			src:  "name: x\nmovment: 1\nmovements:\n  - name: a\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:2: unknown field "movment"`},
		},
		{
			name: "unknown movement field",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n    nxt: [a]\n",
			want: []string{`p.yaml:5: movement "a": unknown field "nxt"`},
		},
		{
			name: "unknown locale",
			src:  "name: x\ndescription:\n  en: hi\n  jp: やあ\nmovements:\n  - name: a\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:4: description: unknown locale "jp" (want en or ja)`},
		},
		{
			name: "repeated field",
			src:  "name: x\nname: y\nmovements:\n  - name: a\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:2: field "name" repeated (first at line 1)`},
		},
		{
			name: "unknown tool",
			src:  "name: x\nmovements:\n  - name: a\n    tools:\n      - Read\n      - Bsh\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:6: movement "a": unknown tool "Bsh"`},
		},
		{
			name: "transition listed",
			src:  "name: x\nmovements:\n  - name: a\n    tools: [transition]\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:4: movement "a": tool "transition" is always offered; do not list it`},
		},
		{
			name: "next names a missing movement",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE, b]\n",
			want: []string{`p.yaml:4: movement "a": next "b" is no movement of this piece nor a sentinel (COMPLETE, ASK, ABORT, WAIT_SUBTASKS)`},
		},
		{
			name: "lower-case sentinel",
			src:  "name: x\nmovements:\n  - name: a\n    next:\n      - complete\n",
			want: []string{`p.yaml:5: movement "a": next "complete" is no movement of this piece nor a sentinel (COMPLETE, ASK, ABORT, WAIT_SUBTASKS)`},
		},
		{
			name: "default_next names a missing movement",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n    default_next: b\n",
			want: []string{`p.yaml:5: movement "a": default_next "b" is no movement of this piece`},
		},
		{
			name: "default_next sentinel not in next",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n    default_next: ABORT\n",
			want: []string{`p.yaml:5: movement "a": default_next "ABORT" is not one of its next`},
		},
		{
			name: "default_next movement not in next",
			src:  "name: x\nmovements:\n  - name: a\n    next: [b]\n  - name: b\n    next: [COMPLETE]\n    default_next: a\n",
			want: []string{`p.yaml:7: movement "b": default_next "a" is not one of its next`},
		},
		{
			name: "initial_movement missing",
			src:  "name: x\ninitial_movement: start\nmovements:\n  - name: a\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:2: initial_movement "start" is no movement of this piece`},
		},
		{
			name: "initial_movement sentinel",
			src:  "name: x\ninitial_movement: COMPLETE\nmovements:\n  - name: a\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:2: initial_movement "COMPLETE" is no movement of this piece`},
		},
		{
			name: "unreachable movement",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n  - name: orphan\n    next: [a]\n",
			want: []string{`p.yaml:5: movement "orphan" is unreachable from initial movement "a"`},
		},
		{
			name: "unreachable from a chosen initial movement",
			src:  "name: x\ninitial_movement: b\nmovements:\n  - name: a\n    next: [b]\n  - name: b\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:4: movement "a" is unreachable from initial movement "b"`},
		},
		{
			name: "duplicate movement name",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n  - name: a\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:5: duplicate movement name "a" (first at line 3)`},
		},
		{
			name: "sentinel as movement name",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n  - name: ASK\n    next: [a]\n",
			want: []string{`p.yaml:5: movement name "ASK" is reserved for a next step`},
		},
		{
			name: "persona single word, no key",
			src:  "name: x\npersonas:\n  planner: Plan it well.\nmovements:\n  - name: a\n    persona: planr\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:6: movement "a": persona "planr" is a single word but not a key of personas, a .md file or text`},
		},
		{
			name: "persona file missing",
			src:  "name: x\nmovements:\n  - name: a\n    persona: ../personas/nope.md\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:4: movement "a": persona file "../personas/nope.md" not found`},
		},
		{
			name: "persona file empty",
			src:  "name: x\nmovements:\n  - name: a\n    persona: ../personas/empty.md\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:4: movement "a": persona file "../personas/empty.md" is empty`},
		},
		{
			name: "persona file outside the file system",
			src:  "name: x\nmovements:\n  - name: a\n    persona: ../../secret.md\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:4: movement "a": persona file "../../secret.md" is outside the directory the piece was loaded from`},
		},
		{
			name: "persona absolute path",
			src:  "name: x\nmovements:\n  - name: a\n    persona: /etc/p.md\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:4: movement "a": persona file "/etc/p.md": write the path relative to the piece file`},
		},
		{
			name: "personas entry with missing file",
			src:  "name: x\npersonas:\n  p: gone.md\nmovements:\n  - name: a\n    persona: p\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:3: personas.p file "gone.md" not found`},
		},
		{
			name: "persona locale map with a bad key reference",
			src:  "name: x\nmovements:\n  - name: a\n    persona:\n      en: ../personas/ok.md\n      ja: nokey\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:6: movement "a": persona "nokey" is a single word but not a key of personas, a .md file or text`},
		},
		{
			name: "max_movements zero",
			src:  "name: x\nmax_movements: 0\nmovements:\n  - name: a\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:2: max_movements must be at least 1, got 0`},
		},
		{
			name: "max_iterations negative",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n    max_iterations: -3\n",
			want: []string{`p.yaml:5: movement "a": max_iterations must be at least 1, got -3`},
		},
		{
			name: "max_iterations not a number",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n    max_iterations: many\n",
			want: []string{`p.yaml:5: movement "a": max_iterations: want a whole number, got "many"`},
		},
		{
			name: "network not a bool",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n    network: sometimes\n",
			want: []string{`p.yaml:5: movement "a": network: want true or false, got "sometimes"`},
		},
		{
			name: "no movements",
			src:  "name: x\nmovements: []\n",
			want: []string{`p.yaml:2: movements: a piece needs at least one movement`},
		},
		{
			name: "movements missing",
			src:  "name: x\n",
			want: []string{`p.yaml:1: missing field "movements"`},
		},
		{
			name: "name missing",
			src:  "movements:\n  - name: a\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:1: missing field "name"`},
		},
		{
			name: "piece name with a space",
			src:  "name: my piece\nmovements:\n  - name: a\n    next: [COMPLETE]\n",
			want: []string{`p.yaml:1: piece name "my piece": use letters, digits, '.', '_' or '-'`},
		},
		{
			name: "movement without a name",
			src:  "name: x\nmovements:\n  - next: [COMPLETE]\n",
			want: []string{`p.yaml:3: movement without a name`},
		},
		{
			name: "empty next",
			src:  "name: x\nmovements:\n  - name: a\n",
			want: []string{`p.yaml:3: movement "a": next is empty; list at least one movement or sentinel`},
		},
		{
			name: "next not a list",
			src:  "name: x\nmovements:\n  - name: a\n    next: COMPLETE\n",
			want: []string{
				`p.yaml:3: movement "a": next is empty; list at least one movement or sentinel`,
				`p.yaml:4: movement "a": next: want a list, got "COMPLETE"`,
			},
		},
		{
			name: "empty file",
			src:  "",
			want: []string{`p.yaml: empty piece: want name and movements`},
		},
		{
			name: "not a mapping",
			src:  "- a\n- b\n",
			want: []string{`p.yaml:1: want a mapping of fields`},
		},
		{
			name: "invalid YAML",
			src:  "name: x\nmovements:\n\t- name: a\n",
			want: []string{`p.yaml:3: invalid YAML: found character that cannot start any token`},
		},
		{
			name: "two documents",
			src:  "name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n---\nname: y\n",
			want: []string{`p.yaml:5: a piece file holds one YAML document; found another`},
		},
		{
			name: "every problem at once, in line order",
			src: "name: x\ninitial_movement: nope\nmovements:\n  - name: a\n    tools: [Bsh]\n    next: [b]\n" +
				"  - name: a\n    next: [COMPLETE]\n    colour: red\n",
			want: []string{
				`p.yaml:2: initial_movement "nope" is no movement of this piece`,
				`p.yaml:5: movement "a": unknown tool "Bsh"`,
				`p.yaml:6: movement "a": next "b" is no movement of this piece nor a sentinel (COMPLETE, ASK, ABORT, WAIT_SUBTASKS)`,
				`p.yaml:7: duplicate movement name "a" (first at line 4)`,
				`p.yaml:9: movement "a": unknown field "colour"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc, err := piece.Parse([]byte(tt.src), "pieces/p.yaml", files, piece.Rules{KnownTool: knownTool})
			if pc != nil {
				t.Errorf("Parse returned a piece along with errors")
			}
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = "pieces/" + w
			}
			if diff := cmp.Diff(want, errList(t, err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTextForms(t *testing.T) {
	tests := []struct {
		name, description string
		want              piece.Text
	}{
		{"plain string", "description: Just English\n", piece.Text{"en": "Just English"}},
		{"locale map", "description:\n  en: English\n  ja: 日本語\n", piece.Text{"en": "English", "ja": "日本語"}},
		{"ja only", "description: {ja: 日本語だけ}\n", piece.Text{"ja": "日本語だけ"}},
		{"absent", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := mustParse(t, "name: x\n"+tt.description+"movements:\n  - name: a\n    next: [COMPLETE]\n", nil)
			if diff := cmp.Diff(tt.want, pc.Description); diff != "" {
				t.Errorf("Description (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePersonaPaths(t *testing.T) {
	files := fstest.MapFS{
		"configs/personas/a.md":    {Data: []byte("  A in English.\n\n")},
		"configs/personas/a.ja.md": {Data: []byte("日本語の A。\n")},
		"configs/personas/b.md":    {Data: []byte("B only.")},
		"configs/personas/c.ja.md": {Data: []byte("C を直接。")},
		"configs/pieces/near.md":   {Data: []byte("Near the piece.")},
	}
	tests := []struct {
		name, persona string
		want          piece.Text
	}{
		{"relative with ja sibling", "../personas/a.md", piece.Text{"en": "A in English.", "ja": "日本語の A。"}},
		{"relative without sibling", "../personas/b.md", piece.Text{"en": "B only."}},
		{"a locale file named directly", "../personas/c.ja.md", piece.Text{"en": "C を直接。"}},
		{"beside the piece", "near.md", piece.Text{"en": "Near the piece."}},
		{"dot segments", "./../personas/./b.md", piece.Text{"en": "B only."}},
		{"explicit locale map skips siblings", "{en: ../personas/a.md, ja: ../personas/b.md}", piece.Text{"en": "A in English.", "ja": "B only."}},
		{"inline Japanese text", "あなたは慎重なレビュアーです", piece.Text{"en": "あなたは慎重なレビュアーです"}},
		{"inline text that mentions a file", "Read README.md first.", piece.Text{"en": "Read README.md first."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: x\nmovements:\n  - name: a\n    persona: " + tt.persona + "\n    next: [COMPLETE]\n"
			pc, err := piece.Parse([]byte(src), "configs/pieces/x.yaml", files, piece.Rules{KnownTool: knownTool})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, pc.Movements[0].Persona); diff != "" {
				t.Errorf("Persona (-want +got):\n%s", diff)
			}
		})
	}
}
