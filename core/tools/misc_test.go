package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/docparse/docparsetest"
	"github.com/google/go-cmp/cmp"
)

func TestChecklist(t *testing.T) {
	env := newEnv(t)
	steps := []struct {
		args obj
		want string
	}{
		{obj{"action": "set", "name": "plan", "items": []string{"read input", "write report", "review"}},
			"### Checklist: plan (0/3 done)\n- [ ] read input\n- [ ] write report\n- [ ] review\n"},
		{obj{"action": "check", "name": "plan", "items": []string{"read input", "3"}},
			"### Checklist: plan (2/3 done)\n- [x] read input\n- [ ] write report\n- [x] review\n"},
		{obj{"action": "uncheck", "name": "plan", "items": []string{"Review"}},
			"### Checklist: plan (1/3 done)\n- [x] read input\n- [ ] write report\n- [ ] review\n"},
		{obj{"action": "set", "name": "plan", "items": []string{"read input", "write report", "send"}},
			"### Checklist: plan (1/3 done)\n- [x] read input\n- [ ] write report\n- [ ] send\n"},
		{obj{"action": "show", "name": "plan"},
			"### Checklist: plan (1/3 done)\n- [x] read input\n- [ ] write report\n- [ ] send\n"},
	}
	for _, s := range steps {
		got := ok(t, call(t, Checklist{}, env, s.args))
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Fatalf("%v (-want +got):\n%s", s.args, diff)
		}
	}
	ok(t, call(t, Checklist{}, env, obj{"action": "set", "name": "a-first", "items": []string{"one"}}))

	got, err := LoadChecklists(env.WS, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "### Checklist: a-first (0/1 done)\n- [ ] one\n\n" +
		"### Checklist: plan (1/3 done)\n- [x] read input\n- [ ] write report\n- [ ] send\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadChecklists (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(env.WS.Root(), "logs/checklists/plan.json")); err != nil {
		t.Errorf("state file: %v", err)
	}

	for _, bad := range []obj{
		{"action": "check", "name": "plan", "items": []string{"no such item"}},
		{"action": "check", "name": "missing", "items": []string{"1"}},
		{"action": "set", "name": "../escape", "items": []string{"x"}},
		{"action": "set", "name": "plan", "items": []string{" "}},
		{"action": "explode", "name": "plan"},
	} {
		failed(t, call(t, Checklist{}, env, bad))
	}
	if empty, err := LoadChecklists(newEnv(t).WS, nil); empty != "" || err != nil {
		t.Errorf("no checklists: %q, %v", empty, err)
	}
}

// TestPathEscapes sends every path-taking tool paths that lead outside the
// workspace and checks nothing outside is read or written.
func TestPathEscapes(t *testing.T) {
	env := newEnv(t)
	outside := filepath.Join(filepath.Dir(env.WS.Root()), "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET gamma"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := env.WS.Root()
	for link, target := range map[string]string{
		"input/link.txt": secret,
		"input/linkdir":  outside,
		"output/new.txt": filepath.Join(outside, "created.txt"), // dangling
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{"../../etc/passwd", "../outside/secret.txt", secret, "/etc/passwd",
		"input/link.txt", "input/linkdir/secret.txt", "output/new.txt"}
	for _, p := range paths {
		calls := map[string]struct {
			tool Tool
			args obj
		}{
			"Read":         {Read{}, obj{"path": p}},
			"Write":        {Write{}, obj{"path": p, "content": "pwned"}},
			"Edit":         {Edit{}, obj{"path": p, "old_string": "gamma", "new_string": "pwned"}},
			"Grep":         {Grep{}, obj{"pattern": "SECRET", "path": p}},
			"Glob":         {Glob{}, obj{"pattern": p}},
			"ReadImage":    {ReadImage{Parser: docparsetest.Runner(t)}, obj{"path": p}},
			"ReadDocument": {ReadDocument{Parser: docparsetest.Runner(t)}, obj{"path": p}},
		}
		for name, c := range calls {
			t.Run(name+" "+p, func(t *testing.T) {
				res := call(t, c.tool, env, c.args)
				if strings.Contains(res.Text, "SECRET") {
					t.Fatalf("read outside: %q", res.Text)
				}
				// Glob may list a link's own name, never what it points to.
				if name != "Glob" || res.IsError {
					msg := failed(t, res)
					if !strings.Contains(msg, "outside the workspace") && !strings.Contains(msg, "no such file") {
						t.Errorf("unclear error: %q", msg)
					}
				}
			})
		}
	}
	// Grep over the whole workspace does not follow the links either.
	if got := ok(t, call(t, Grep{}, env, obj{"pattern": "SECRET"})); got != "No matches for SECRET" {
		t.Errorf("Grep followed a link: %q", got)
	}
	if b, _ := os.ReadFile(secret); string(b) != "TOP-SECRET gamma" {
		t.Errorf("secret changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "created.txt")); err == nil {
		t.Error("a file was created outside through a dangling link")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("outside dir has %d entries, want 1", len(entries))
	}
}

type panicky struct{ Read }

func (panicky) Call(context.Context, *Env, json.RawMessage) Result { panic("boom") }

func TestSetAndSafe(t *testing.T) {
	s := Builtin(nil, nil)
	if diff := cmp.Diff([]string{"Read", "Write", "Edit", "Glob", "Grep", "ReadImage", "ReadDocument", "Checklist"}, s.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	sub, err := s.Select([]string{"Grep", "Read", "Grep"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Grep", "Read"}, sub.Names()); diff != "" {
		t.Errorf("Select (-want +got):\n%s", diff)
	}
	if _, err := s.Select([]string{"Read", "Rm"}); err == nil || !strings.Contains(err.Error(), `"Rm"`) {
		t.Errorf("Select unknown: %v", err)
	}
	if _, ok := s.Lookup("Bash"); ok {
		t.Error("Lookup(Bash) found a tool not registered")
	}
	if _, err := NewSet(Read{}, Read{}); err == nil {
		t.Error("duplicate names accepted")
	}
	env := newEnv(t)
	if msg := failed(t, Safe(context.Background(), panicky{}, env, nil)); !strings.Contains(msg, "internal error") {
		t.Errorf("panic result: %q", msg)
	}
	if msg := failed(t, Safe(context.Background(), Read{}, env, json.RawMessage(`{"path":`))); !strings.Contains(msg, "invalid arguments") {
		t.Errorf("malformed JSON result: %q", msg)
	}
	failed(t, Safe(context.Background(), Read{}, &Env{}, json.RawMessage(`{"path":"x"}`)))
}
