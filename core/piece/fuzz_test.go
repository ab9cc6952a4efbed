package piece_test

import (
	"slices"
	"testing"
	"testing/fstest"

	"github.com/baton-bot/baton/core/piece"
)

// FuzzParse checks that Parse never panics and that every piece it accepts
// is a sound state machine.
func FuzzParse(f *testing.F) {
	// Small seeds: the fuzzer minimises every input that finds new coverage,
	// and minimising the multi-kilobyte built-in pieces stalls it for minutes.
	for _, s := range []string{
		"name: x\nmovements:\n  - name: a\n    next: [COMPLETE]\n",
		"name: x\ninitial_movement: b\nmovements:\n  - name: a\n    next: [b]\n  - name: b\n    next: [a, ASK]\n    default_next: a\n",
		"name: x\npersonas:\n  p: ../personas/p.md\nmovements:\n  - &m {name: a, persona: p, next: [COMPLETE]}\n  - *m\n",
		"name: x\nmovements:\n  - name: a\n    persona: {en: ../personas/p.md, ja: 日本語}\n    next: [WAIT_SUBTASKS]\n",
		"a: &a [*a]\n",
		"name: x\nmax_movements: 3\ndescription: {en: a, ja: b}\nmovements:\n  - name: a\n    tools: [Read, Bash]\n    max_iterations: 2\n    verify: true\n    next: [COMPLETE, ABORT]\n    default_next: ABORT\n",
		"",
	} {
		f.Add([]byte(s))
	}
	files := fstest.MapFS{
		"personas/p.md":    {Data: []byte("P.")},
		"personas/p.ja.md": {Data: []byte("ピー。")},
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		pc, err := piece.Parse(src, "pieces/f.yaml", files, piece.Rules{KnownTool: knownTool})
		if err != nil {
			if pc != nil {
				t.Fatalf("Parse returned a piece and an error")
			}
			return
		}
		checkSound(t, pc)
	})
}

func checkSound(t *testing.T, pc *piece.Piece) {
	t.Helper()
	if len(pc.Movements) == 0 || pc.MaxMovements < 1 || pc.Name == "" {
		t.Fatalf("accepted piece %q with %d movements, max_movements %d", pc.Name, len(pc.Movements), pc.MaxMovements)
	}
	names := map[string]bool{}
	for _, m := range pc.Movements {
		if names[m.Name] || m.Name == "" || piece.IsSentinel(m.Name) {
			t.Fatalf("accepted movement name %q (empty, duplicate or sentinel)", m.Name)
		}
		names[m.Name] = true
	}
	if !names[pc.InitialMovement] {
		t.Fatalf("initial movement %q does not exist", pc.InitialMovement)
	}
	for _, m := range pc.Movements {
		if m.MaxIterations < 1 || len(m.Next) == 0 {
			t.Fatalf("movement %q: max_iterations %d, next %v", m.Name, m.MaxIterations, m.Next)
		}
		for _, n := range m.Next {
			if !names[n] && !piece.IsSentinel(n) {
				t.Fatalf("movement %q: next %q does not resolve", m.Name, n)
			}
		}
		if m.DefaultNext != "" && !slices.Contains(m.Next, m.DefaultNext) {
			t.Fatalf("movement %q: default_next %q not in next %v", m.Name, m.DefaultNext, m.Next)
		}
		for _, tool := range m.Tools {
			if !knownTool(tool) {
				t.Fatalf("movement %q: unknown tool %q accepted", m.Name, tool)
			}
		}
	}
	reached := map[string]bool{pc.InitialMovement: true}
	queue := []string{pc.InitialMovement}
	for len(queue) > 0 {
		m, _ := pc.Movement(queue[0])
		queue = queue[1:]
		for _, n := range m.Next {
			if names[n] && !reached[n] {
				reached[n] = true
				queue = append(queue, n)
			}
		}
	}
	for name := range names {
		if !reached[name] {
			t.Fatalf("movement %q is unreachable", name)
		}
	}
}
