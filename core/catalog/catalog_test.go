package catalog

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// TestLocalesHaveTheSameKeys: every locale holds exactly English's keys,
// and no text is empty.
func TestLocalesHaveTheSameKeys(t *testing.T) {
	en, err := For("en")
	if err != nil {
		t.Fatal(err)
	}
	if len(en.Keys()) < 150 {
		t.Fatalf("English has %d keys; the catalogue did not load", len(en.Keys()))
	}
	for _, loc := range Locales {
		tx, err := For(loc)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(en.Keys(), tx.Keys()); diff != "" {
			t.Errorf("keys of %s differ from English's (-en +%s):\n%s", loc, loc, diff)
		}
		for _, k := range tx.Keys() {
			if strings.TrimSpace(tx.Text(k)) == "" {
				t.Errorf("%s: %s is empty", loc, k)
			}
		}
	}
}

// TestSameKeysCatchesAMissingKey: the comparison above fails when a locale
// lacks a key that English has.
func TestSameKeysCatchesAMissingKey(t *testing.T) {
	fsys := fstest.MapFS{
		"en/tools.yaml": {Data: []byte("read:\n  description: Read a file\n  cut: cut\n")},
		"ja/tools.yaml": {Data: []byte("read:\n  description: ファイルを読む\n")},
	}
	en, err := parse(fsys, "en")
	if err != nil {
		t.Fatal(err)
	}
	ja, err := parse(fsys, "ja")
	if err != nil {
		t.Fatal(err)
	}
	enKeys := (&Texts{m: en}).Keys()
	jaKeys := (&Texts{m: ja}).Keys()
	if cmp.Equal(enKeys, jaKeys) {
		t.Fatalf("keys %v and %v compare equal", enKeys, jaKeys)
	}
	if want := []string{"tools.read.cut", "tools.read.description"}; !cmp.Equal(enKeys, want) {
		t.Errorf("keys = %v, want %v", enKeys, want)
	}
}

var placeholder = regexp.MustCompile(`\{[a-z_]+\}|%[-+#0]*[0-9]*[a-zA-Z%]`)

// TestPlaceholdersMatch: a translation fills the same {name}s and
// fmt verbs as the English text, so that no value is lost or left
// unfilled.
func TestPlaceholdersMatch(t *testing.T) {
	en, _ := For("en")
	for _, loc := range Locales[1:] {
		tx, err := For(loc)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range en.Keys() {
			want := placeholder.FindAllString(en.Text(k), -1)
			got := placeholder.FindAllString(tx.Text(k), -1)
			if strings.Contains(en.Text(k), "%") {
				// fmt verbs are filled in order.
				if !slices.Equal(want, got) {
					t.Errorf("%s %s: verbs %v, English has %v", loc, k, got, want)
				}
				continue
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(slices.Compact(want), slices.Compact(got)) {
				t.Errorf("%s %s: placeholders %v, English has %v", loc, k, got, want)
			}
		}
	}
}

// TestMissingKeyNeverPanics: a key a locale lacks is English's text, a key
// English lacks too is the key itself, and neither the nil catalogue nor
// an unknown locale panics.
func TestMissingKeyNeverPanics(t *testing.T) {
	en, _ := For("en")
	ja, _ := For("ja")
	partial := &Texts{locale: "ja", m: map[string]string{}, en: en.m}
	if got, want := partial.Text("engine.reminder"), en.Text("engine.reminder"); got != want {
		t.Errorf("a key missing from ja = %q, want English's %q", got, want)
	}
	for _, tx := range []*Texts{nil, en, ja, partial, Or("fr")} {
		if got := tx.Text("no.such.key"); got != "no.such.key" {
			t.Errorf("%s: Text(no.such.key) = %q, want the key", tx.Locale(), got)
		}
		if got := tx.Fill("no.such.key", "n", "1", "odd"); got != "no.such.key" {
			t.Errorf("%s: Fill(no.such.key) = %q, want the key", tx.Locale(), got)
		}
	}
	if got := (*Texts)(nil).Fill("chat.unknown_command", "name", "x"); got != "I don't know the command `!x`." {
		t.Errorf("nil catalogue Fill = %q, want English", got)
	}
	if got := ja.Fill("chat.unknown_command", "name", "x"); got != "`!x` というコマンドはありません。" {
		t.Errorf("ja Fill = %q", got)
	}
	if got := ja.Fill("tools.glob.more", "n", "3"); got != "[… ほか 3 件。パターンを絞ってください]" {
		t.Errorf("ja Fill = %q", got)
	}
	if _, err := For("fr"); err == nil {
		t.Error(`For("fr") succeeded`)
	}
	if Or("fr").Locale() != "en" {
		t.Error(`Or("fr") is not English`)
	}
}

// TestKeysUsedInCodeExist reads the Go source of the catalogue's users
// and checks that every key it names exists: full keys
// ("tools.read.cut_lines") in the tools, the engine and the chat; the
// engine's short keys in its msg and fill calls ("engine." + key); the
// chat's in say and Say calls, the adapters' included ("chat." + key); the
// egress proxy's in its say calls ("egress." + key).
func TestKeysUsedInCodeExist(t *testing.T) {
	en, _ := For("en")
	full := regexp.MustCompile(`^(engine|tools|chat)\.[a-z0-9_]+(\.[a-z0-9_]+)*$`)
	short := regexp.MustCompile(`^[a-z0-9_]+$`)
	type rule struct {
		dir   string
		full  bool              // full keys may appear as any string
		calls map[string]string // function name → the prefix of its short keys
	}
	rules := []rule{
		{"../tools", true, nil},
		{"../mcp", true, nil},
		{"../engine", true, map[string]string{"msg": "engine.", "fill": "engine."}},
		{"../chat", true, map[string]string{"say": "chat.", "Say": "chat."}},
		{"../egress", false, map[string]string{"say": "egress."}},
		{"../../adapters", false, map[string]string{"Say": "chat."}},
	}
	used := 0
	for _, r := range rules {
		err := filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, src, 0)
			if err != nil {
				return err
			}
			check := func(key string) {
				used++
				if !en.Has(key) {
					t.Errorf("%s names the key %s, which the catalogue lacks", p, key)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && r.full && full.MatchString(s) {
						check(s)
					}
				case *ast.CallExpr:
					name := ""
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						name = fn.Name
					case *ast.SelectorExpr:
						name = fn.Sel.Name
					}
					prefix, ok := r.calls[name]
					if !ok {
						return true
					}
					for _, a := range n.Args {
						if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if s, _ := strconv.Unquote(lit.Value); short.MatchString(s) {
								check(prefix + s)
							}
							break // the key is the first string argument
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if used < 150 {
		t.Errorf("found %d uses of catalogue keys; the scan is missing the code", used)
	}
}
