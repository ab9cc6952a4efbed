package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzToolArguments hands every tool but Bash the arguments a hostile or
// confused model might write: each call returns a result, no tool panics,
// and nothing appears beside the workspace.
func FuzzToolArguments(f *testing.F) {
	for _, seed := range []struct {
		tool uint8
		args string
	}{
		{0, `{"path":"input/a.txt"}`},
		{0, `{"path":"../../etc/passwd","offset":-5,"limit":1e9}`},
		{1, `{"path":"output/x.txt","content":"hi"}`},
		{1, `{"path":"../escape.txt","content":"out"}`},
		{1, `{"path":"/tmp/abs.txt","content":"out"}`},
		{2, `{"path":"input/a.txt","old_string":"a","new_string":"b","replace_all":true}`},
		{3, `{"pattern":"**/*"}`},
		{3, `{"pattern":"../../*"}`},
		{4, `{"pattern":"(","path":"."}`},
		{4, `{"pattern":"a","path":"..","glob":"**","context":99999}`},
		{7, `{"action":"set","name":"../../x","items":["a"]}`},
		{7, `{"action":"check","name":"plan","items":[1,2]}`},
		{5, `{"path":"input/a.txt"}`},
		{6, `{"path":"input/a.txt"}`},
		{0, `null`},
		{0, `[1,2]`},
		{1, `{"path":"output/x","content":"a"} trailing`},
		{1, "{\"path\":\"output/\\u0000x\",\"content\":\"a\"}"},
	} {
		f.Add(seed.tool, seed.args)
	}
	set := Builtin(nil, nil)
	names := set.Names()
	f.Fuzz(func(t *testing.T, which uint8, args string) {
		tool, _ := set.Lookup(names[int(which)%len(names)])
		env := newEnv(t)
		put(t, env, "input/a.txt", []byte("a line\nanother line\n"))
		outside := filepath.Dir(env.WS.Root())
		res := Safe(context.Background(), tool, env, json.RawMessage(args))
		if strings.Contains(res.Text, "internal error") {
			t.Errorf("%s panicked on %q: %s", tool.Name(), args, res.Text)
		}
		entries, err := os.ReadDir(outside)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != filepath.Base(env.WS.Root()) {
				t.Errorf("%s with %q left %s beside the workspace", tool.Name(), args, e.Name())
			}
		}
	})
}
