package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/baton-bot/baton"

// listedPackage is the part of `go list -json` output the layout rules need.
type listedPackage struct {
	ImportPath string
	Standard   bool
	Deps       []string
}

// goListDeps runs `go list -test -deps -json patterns…` from the module root
// and returns every package it lists, test variants included, by import
// path. With -test, a package's tests appear as their own entries ("p
// [p.test]", "p_test [p.test]", "p.test") whose Deps hold what the tests
// import; owner maps each back to the package whose directory holds them.
func goListDeps(t testing.TB, patterns ...string) map[string]listedPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH; skipping the layout check")
	}
	cmd := exec.Command(goTool, append([]string{"list", "-test", "-deps", "-json"}, patterns...)...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -test -deps -json %s: %v\n%s", strings.Join(patterns, " "), err, stderr.String())
	}
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// owner returns the import path of the package whose directory holds the
// listed package path: "p [q.test]" → p, "p_test" → p, "p.test" → p.
func owner(path string) string {
	if i := strings.Index(path, " ["); i >= 0 {
		path = path[:i]
	}
	if p, ok := strings.CutSuffix(path, ".test"); ok {
		return p
	}
	if p, ok := strings.CutSuffix(path, "_test"); ok {
		return p
	}
	return path
}

func within(path, root string) bool {
	path = owner(path)
	return path == root || strings.HasPrefix(path, root+"/")
}

// adapter returns the adapter holding path ("…/adapters/slack" for
// "…/adapters/slack/slackfake"), or "" outside adapters.
func adapter(path string) string {
	rest, ok := strings.CutPrefix(owner(path), module+"/adapters/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return module + "/adapters/" + name
}

// TestLayout enforces every "never" arrow of SPEC §2 and STYLE.md, the
// imports of tests included: the root package core imports only the
// standard library; core never reaches the queue, an adapter or bot;
// adapters never reach the queue, bot or one another; the queue never
// reaches an adapter or bot. Test support that needs a queue lives outside
// core and adapters (bot/e2e).
func TestLayout(t *testing.T) {
	pkgs := goListDeps(t, module+"/...")
	paths := slices.Sorted(maps.Keys(pkgs))

	t.Run("core imports only the standard library", func(t *testing.T) {
		core, ok := pkgs[module+"/core"]
		if !ok {
			t.Fatalf("%s/core not listed", module)
		}
		for _, dep := range core.Deps {
			if p, ok := pkgs[dep]; !ok || !p.Standard {
				t.Errorf("%s/core depends on %s, which is not in the standard library", module, dep)
			}
		}
	})

	rules := []struct {
		name      string
		from, not string
	}{
		{"core never imports queue", module + "/core", module + "/queue"},
		{"core never imports adapters", module + "/core", module + "/adapters"},
		{"core never imports bot", module + "/core", module + "/bot"},
		{"adapters never import queue", module + "/adapters", module + "/queue"},
		{"adapters never import bot", module + "/adapters", module + "/bot"},
		{"queue never imports adapters", module + "/queue", module + "/adapters"},
		{"queue never imports bot", module + "/queue", module + "/bot"},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			checked := 0
			for _, path := range paths {
				p := pkgs[path]
				if !within(path, r.from) {
					continue
				}
				checked++
				if i := slices.IndexFunc(p.Deps, func(d string) bool { return within(d, r.not) }); i >= 0 {
					t.Errorf("%s depends on %s (directly, through its imports or in its tests)", path, p.Deps[i])
				}
			}
			if checked == 0 {
				t.Fatalf("no package under %s listed", r.from)
			}
		})
	}

	t.Run("adapters never import one another", func(t *testing.T) {
		checked := 0
		for _, path := range paths {
			p := pkgs[path]
			from := adapter(path)
			if from == "" {
				continue
			}
			checked++
			for _, d := range p.Deps {
				if to := adapter(d); to != "" && to != from {
					t.Errorf("%s depends on %s, another adapter", path, d)
					break
				}
			}
		}
		if checked == 0 {
			t.Fatal("no adapter listed")
		}
	})

	t.Run("nothing imports bot", func(t *testing.T) {
		for _, path := range paths {
			p := pkgs[path]
			if owner(path) == module+"/bot" {
				continue // bot's own tests
			}
			if slices.Contains(p.Deps, module+"/bot") {
				t.Errorf("%s imports %s/bot", path, module)
			}
		}
	})
}
