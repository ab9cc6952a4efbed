package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/sandbox"
)

// TestDescriptionsInEveryLocale: in every locale each tool's description
// and each description in its schema come from the catalogue (never a
// bare key, never a $placeholder left in), the schema is a JSON object,
// and a translation differs from the English.
func TestDescriptionsInEveryLocale(t *testing.T) {
	sb, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.None})
	if err != nil {
		t.Fatal(err)
	}
	bash, err := NewBash(BashConfig{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	tools := Builtin(bash, nil).Tools()
	var en *catalog.Texts
	for _, loc := range catalog.Locales {
		tx, err := catalog.For(loc)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools {
			d := tool.Description(tx)
			if d == "" || strings.HasPrefix(d, "tools.") || strings.Contains(d, "{") {
				t.Errorf("%s %s: description %q", loc, tool.Name(), d)
			}
			if loc != "en" && d == tool.Description(en) {
				t.Errorf("%s %s: description is the English one", loc, tool.Name())
			}
			var schema struct {
				Type       string `json:"type"`
				Properties map[string]struct {
					Description *string `json:"description"`
				} `json:"properties"`
			}
			raw := tool.Schema(tx)
			if err := json.Unmarshal(raw, &schema); err != nil || schema.Type != "object" {
				t.Errorf("%s %s: schema %s: %v", loc, tool.Name(), raw, err)
				continue
			}
			for name, p := range schema.Properties {
				if p.Description == nil {
					continue // action's enum says it all
				}
				if *p.Description == "" || strings.HasPrefix(*p.Description, "tools.") {
					t.Errorf("%s %s.%s: description %q", loc, tool.Name(), name, *p.Description)
				}
			}
		}
	}
}

// TestJapaneseResults: with Japanese texts the notes and errors of a call
// are Japanese; without texts they are English.
func TestJapaneseResults(t *testing.T) {
	ja, err := catalog.For("ja")
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t)
	put(t, env, "input/a.txt", []byte("x\nx\n"))
	for _, tt := range []struct {
		tool     Tool
		args     obj
		en, ja   string
		isResult bool
	}{
		{Read{}, obj{"path": "/etc/passwd"}, "Read: /etc/passwd is outside the workspace: absolute paths are refused", "Read: /etc/passwd はワークスペースの外です: 絶対パスは使えません", false},
		{Write{}, obj{"path": "logs/x", "content": "y"}, "Write: logs/x is under logs/, which is read-only for tools", "Write: logs/x は logs/ の下にあり", false},
		{Read{}, obj{"path": "input/none.txt"}, "Read: input/none.txt: no such file or folder", "Read: input/none.txt: そのようなファイルやフォルダーはありません", false},
		{Edit{}, obj{"path": "input/a.txt", "old_string": "y", "new_string": "z"}, "Edit: old_string was not found in input/a.txt", "Edit: input/a.txt に old_string が見つかりません", false},
		{Read{}, obj{"path": 3}, "Read: invalid arguments: json: cannot unmarshal", "Read: 引数が正しくありません: json: cannot unmarshal", false},
		{Glob{}, obj{"pattern": "input/*.md"}, "No paths match input/*.md", "input/*.md に一致するパスはありません", true},
		{Checklist{}, obj{"action": "set", "name": "plan", "items": []string{"a"}}, "### Checklist: plan (0/1 done)", "### チェックリスト: plan（0/1 完了）", true},
	} {
		for _, c := range []struct {
			tx   *catalog.Texts
			want string
		}{{nil, tt.en}, {ja, tt.ja}} {
			env.Texts = c.tx
			res := call(t, tt.tool, env, tt.args)
			if res.IsError == tt.isResult || !strings.Contains(res.Text, c.want) {
				t.Errorf("%s %v in %s = %+v, want it to hold %q", tt.tool.Name(), tt.args, c.tx.Locale(), res, c.want)
			}
		}
	}
}

// TestMissingTextIsItsKey: a failure whose key the catalogue lacks is
// reported as the key, not a panic.
func TestMissingTextIsItsKey(t *testing.T) {
	env := newEnv(t)
	env.Texts, _ = catalog.For("ja")
	if res := env.fail("Read", "", fault("tools.no_such_key", "n", "1")); res.Text != "Read: tools.no_such_key" || !res.IsError {
		t.Errorf("result = %+v", res)
	}
}
