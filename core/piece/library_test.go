package piece_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/configs"
	"github.com/baton-bot/baton/core/piece"
)

// writeFiles writes name → content under dir and returns dir.
func writeFiles(tb testing.TB, dir string, files map[string]string) string {
	tb.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func loadBuiltin(tb testing.TB) *piece.Library {
	tb.Helper()
	lib, err := piece.Load(configs.FS, "", piece.Rules{KnownTool: knownTool})
	if err != nil {
		tb.Fatalf("Load built-in pieces: %v", err)
	}
	return lib
}

var placeholder = regexp.MustCompile(`\{(task|movement|movement_count|max_movements|iteration)\}`)

func TestBuiltinPieces(t *testing.T) {
	lib := loadBuiltin(t)
	if diff := cmp.Diff([]string{"chat", "plan-implement-verify", "research"}, lib.Names()); diff != "" {
		t.Fatalf("Names (-want +got):\n%s", diff)
	}
	for _, name := range lib.Names() {
		pc, _ := lib.Lookup(name)
		for _, loc := range []string{"en", "ja"} {
			t.Run(name+"/"+loc, func(t *testing.T) {
				if pc.Description[loc] == "" {
					t.Errorf("description has no %s text", loc)
				}
				for _, m := range pc.Movements {
					if m.Persona[loc] == "" {
						t.Errorf("movement %q: persona has no %s text", m.Name, loc)
					}
					if m.Instruction[loc] == "" {
						t.Errorf("movement %q: instruction has no %s text", m.Name, loc)
					}
					got := m.Render(loc, piece.Vars{Task: "T", MovementCount: 1, MaxMovements: pc.MaxMovements, Iteration: 1})
					if left := placeholder.FindString(got); left != "" {
						t.Errorf("movement %q: %s left in rendered instruction", m.Name, left)
					}
					if loc == "ja" && !strings.ContainsAny(got, "のをはがにで") {
						t.Errorf("movement %q: ja instruction is not Japanese: %q", m.Name, got)
					}
				}
			})
		}
	}
}

func TestBuiltinShapes(t *testing.T) {
	lib := loadBuiltin(t)

	chat, _ := lib.Lookup("chat")
	if len(chat.Movements) != 1 {
		t.Fatalf("chat has %d movements, want 1", len(chat.Movements))
	}
	if diff := cmp.Diff([]string{"COMPLETE", "ASK", "ABORT", "WAIT_SUBTASKS"}, chat.Movements[0].Next); diff != "" {
		t.Errorf("chat next (-want +got):\n%s", diff)
	}
	if chat.Movements[0].DefaultNext != piece.Complete {
		t.Errorf("chat default_next = %q, want COMPLETE", chat.Movements[0].DefaultNext)
	}

	piv, _ := lib.Lookup("plan-implement-verify")
	var order []string
	for _, m := range piv.Movements {
		order = append(order, m.Name)
	}
	if diff := cmp.Diff([]string{"plan", "implement", "verify"}, order); diff != "" {
		t.Errorf("plan-implement-verify movements (-want +got):\n%s", diff)
	}
	verify, _ := piv.Movement("verify")
	if !verify.Verify || !verify.GitContext || !verify.Allows("implement") || !verify.Allows(piece.Complete) {
		t.Errorf("verify = %+v; want verify, git_context and next implement and COMPLETE", verify)
	}

	research, _ := lib.Lookup("research")
	readOnly := []string{"Read", "Glob", "Grep", "ReadDocument", "ReadImage"}
	order = order[:0]
	for _, m := range research.Movements {
		order = append(order, m.Name)
		for _, tool := range m.Tools {
			if !slices.Contains(readOnly, tool) {
				t.Errorf("research movement %q has tool %q, which is not read-only", m.Name, tool)
			}
		}
	}
	if diff := cmp.Diff([]string{"plan", "investigate", "report"}, order); diff != "" {
		t.Errorf("research movements (-want +got):\n%s", diff)
	}
}

// Every persona exists in English and Japanese.
func TestBuiltinPersonaPairs(t *testing.T) {
	en, _ := fs.Glob(configs.FS, "personas/*.md")
	var base, ja []string
	for _, f := range en {
		if b, ok := strings.CutSuffix(f, ".ja.md"); ok {
			ja = append(ja, b)
		} else {
			base = append(base, strings.TrimSuffix(f, ".md"))
		}
	}
	if diff := cmp.Diff(base, ja); diff != "" {
		t.Errorf("personas without a Japanese (or English) twin (-en +ja):\n%s", diff)
	}
	for _, want := range []string{"assistant", "implementer", "planner", "researcher", "verifier"} {
		if !slices.Contains(base, "personas/"+want) {
			t.Errorf("persona %s missing", want)
		}
	}
}

func TestLoadPiecesDir(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"pieces/chat.yaml": "name: chat\ndescription: Local chat\npersonas:\n  me: ../personas/me.md\n" +
			"movements:\n  - name: reply\n    persona: me\n    next: [COMPLETE]\n",
		"pieces/extra.yml":  "name: extra\nmovements:\n  - name: go\n    next: [ABORT]\n",
		"pieces/notes.txt":  "not a piece",
		"personas/me.md":    "Me, in English.",
		"personas/me.ja.md": "日本語の私。",
		"pieces/sub/x.yaml": "ignored: true",
	})
	piecesDir := filepath.Join(dir, "pieces")
	lib, err := piece.Load(configs.FS, piecesDir, piece.Rules{KnownTool: knownTool})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff([]string{"chat", "extra", "plan-implement-verify", "research"}, lib.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	chat, _ := lib.Lookup("chat")
	if chat.Source != filepath.Join(piecesDir, "chat.yaml") || chat.Movements[0].Name != "reply" {
		t.Errorf("chat from %s with movement %q; want the pieces_dir override", chat.Source, chat.Movements[0].Name)
	}
	if diff := cmp.Diff(piece.Text{"en": "Me, in English.", "ja": "日本語の私。"}, chat.Movements[0].Persona); diff != "" {
		t.Errorf("persona resolved on disk (-want +got):\n%s", diff)
	}
	research, _ := lib.Lookup("research")
	if !strings.HasPrefix(research.Source, piece.BuiltinPrefix) {
		t.Errorf("research Source = %q, want the built-in", research.Source)
	}
	if _, ok := lib.Lookup("nope"); ok {
		t.Errorf("Lookup(nope) found a piece")
	}
}

func TestLoadMissingDir(t *testing.T) {
	lib, err := piece.Load(configs.FS, filepath.Join(t.TempDir(), "absent"), piece.Rules{KnownTool: knownTool})
	if err != nil {
		t.Fatalf("Load with a missing pieces_dir: %v", err)
	}
	if len(lib.Names()) != 3 {
		t.Errorf("Names = %v, want the three built-in pieces", lib.Names())
	}
}

func TestLoadDirErrors(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"a.yaml": "name: same\nmovements:\n  - name: m\n    next: [COMPLETE]\n",
		"b.yaml": "# second\nname: same\nmovements:\n  - name: m\n    next: [COMPLETE]\n",
		"c.yaml": "name: broken\nmovements:\n  - name: m\n    next: [elsewhere]\n",
	})
	lib, err := piece.Load(configs.FS, dir, piece.Rules{KnownTool: knownTool})
	if lib != nil {
		t.Errorf("Load returned a library along with errors")
	}
	want := []string{
		filepath.Join(dir, "b.yaml") + `:2: piece "same" is also defined in ` + filepath.Join(dir, "a.yaml"),
		filepath.Join(dir, "c.yaml") + `:4: movement "m": next "elsewhere" is no movement of this piece nor a sentinel (COMPLETE, ASK, ABORT, WAIT_SUBTASKS)`,
	}
	if diff := cmp.Diff(want, errList(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestValidate is what `baton pieces validate FILES` prints.
func TestValidate(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"pieces/broken.yaml": "name: broken\nmovements:\n  - name: a\n    tools: [Read, Bsh]\n    next: [COMPLETE]\n    persona: ../personas/gone.md\n",
		"pieces/good.yaml":   "name: good\nmovements:\n  - name: a\n    next: [COMPLETE]\n",
	})
	t.Chdir(dir)
	lib := loadBuiltin(t)

	var got []string
	for _, err := range lib.Validate([]string{"pieces/good.yaml", "pieces/broken.yaml", "pieces/missing.yaml"}) {
		got = append(got, err.Error())
	}
	want := []string{
		`pieces/broken.yaml:4: movement "a": unknown tool "Bsh"`,
		`pieces/broken.yaml:6: movement "a": persona file "../personas/gone.md" not found`,
		`pieces/missing.yaml: cannot read: no such file or directory`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
	if errs := lib.Validate([]string{"pieces/good.yaml"}); errs != nil {
		t.Errorf("Validate(good) = %v, want nil", errs)
	}
}

// TestNetworkRefused: a movement asking for the network is refused unless
// the operator's configuration grants it, with the key named.
func TestNetworkRefused(t *testing.T) {
	src := `name: fetcher
movements:
  - name: fetch
    instruction: Fetch.
    tools: [Bash]
    network: true
    next: [COMPLETE]
`
	why := "the operator has not allowed it (set tools.bash.network: allow_pieces)"
	_, err := piece.Parse([]byte(src), "pieces/p.yaml", nil, piece.Rules{KnownTool: knownTool, NoNetwork: why})
	want := []string{`pieces/p.yaml:6: movement "fetch": network: true is refused: ` + why}
	if diff := cmp.Diff(want, errList(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if _, err := piece.Parse([]byte(src), "pieces/p.yaml", nil, piece.Rules{KnownTool: knownTool}); err != nil {
		t.Errorf("granted: %v", err)
	}
	// The same rule holds for pieces_dir at start.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fetcher.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := piece.Load(configs.FS, dir, piece.Rules{KnownTool: knownTool, NoNetwork: why}); err == nil || !strings.Contains(err.Error(), "tools.bash.network") {
		t.Errorf("Load: %v", err)
	}
}
