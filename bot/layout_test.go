package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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

// goListDeps runs `go list -deps -json patterns…` from the module root and
// returns every package it lists, by import path.
func goListDeps(t testing.TB, patterns ...string) map[string]listedPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH; skipping the layout check")
	}
	cmd := exec.Command(goTool, append([]string{"list", "-deps", "-json"}, patterns...)...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -json %s: %v\n%s", strings.Join(patterns, " "), err, stderr.String())
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

func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

// TestLayout enforces the arrows of SPEC §2 and STYLE.md: the root package
// core imports only the standard library, adapters never reach the queue
// package, and nothing under core reaches an adapter.
func TestLayout(t *testing.T) {
	pkgs := goListDeps(t, module+"/core", module+"/core/...", module+"/adapters/...")

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
		{"adapters never import queue", module + "/adapters", module + "/queue"},
		{"core never imports adapters", module + "/core", module + "/adapters"},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			checked := 0
			for path, p := range pkgs {
				if !within(path, r.from) {
					continue
				}
				checked++
				if i := slices.IndexFunc(p.Deps, func(d string) bool { return within(d, r.not) }); i >= 0 {
					t.Errorf("%s depends on %s (directly or through its imports)", path, p.Deps[i])
				}
			}
			if checked == 0 {
				t.Fatalf("no package under %s listed", r.from)
			}
		})
	}
}
