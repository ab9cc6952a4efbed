package engine_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// allTools is a piece whose movement offers every built-in tool and every
// field of the transition tool.
const allTools = `
name: all-tools
description: every tool
movements:
  - name: work
    persona: You work with every tool.
    instruction: "Do: {task}"
    tools: [Read, Write, Edit, Glob, Grep, Bash, ReadImage, ReadDocument, Checklist]
    next: [COMPLETE, ASK, ABORT, WAIT_SUBTASKS, check]
    max_iterations: 10
  - name: check
    persona: You check.
    instruction: Check it.
    tools: [Read]
    next: [COMPLETE]
`

// hasJapanese reports whether s holds a kana or kanji.
func hasJapanese(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return unicode.In(r, unicode.Hiragana, unicode.Katakana, unicode.Han)
	}) >= 0
}

// descriptions returns every "description" in a JSON Schema, by its path.
func descriptions(t *testing.T, raw json.RawMessage) map[string]string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	out := map[string]string{}
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "description" {
					out[at] = s
					continue
				}
				walk(at+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s/%d", at, i), x)
			}
		}
	}
	walk("", v)
	return out
}

// renderRequest shows what the model is sent: the tools offered with their
// schemas, then the messages.
func renderRequest(t *testing.T, req llmtest.Request) string {
	t.Helper()
	var b strings.Builder
	for _, tool := range req.Tools {
		var params bytes.Buffer
		if err := json.Indent(&params, tool.Parameters, "", "  "); err != nil {
			t.Fatalf("%s: parameters %s: %v", tool.Name, tool.Parameters, err)
		}
		fmt.Fprintf(&b, "=== tool %s\n%s\n%s\n\n", tool.Name, tool.Description, params.String())
	}
	for _, m := range req.Messages {
		fmt.Fprintf(&b, "=== %s\n%s\n\n", m.Role, m.Text())
	}
	return b.String()
}

// TestFirstRequest: the first request of a job — every tool's description
// and parameters, the transition tool, the prompts, the bot's label on its
// comments — is the reviewed golden in each locale, and with locale ja
// every description in it is Japanese.
func TestFirstRequest(t *testing.T) {
	for _, tt := range []struct{ locale, request, comment, answer, label string }{
		{"en", "please summarise the report", "please update the table from last time", "Updated.", "Baton (bot): Updated."},
		{"ja", "報告書を要約してください", "前回の表を更新してください", "更新しました。", "Baton（ボット）: 更新しました。"},
	} {
		t.Run(tt.locale, func(t *testing.T) {
			f := newFixture(t, map[string]string{"all-tools": allTools}, func(c *engine.Config) { c.Locale = tt.locale })
			f.comment(core.RoleUser, "alice", tt.comment)
			f.comment(core.RoleBot, "baton", tt.answer)
			f.srv.Script(llmtest.Transition("COMPLETE", "ok"))
			f.run(f.start("all-tools", tt.request))
			req := f.srv.Requests()[0]
			if len(req.Tools) != 10 {
				t.Fatalf("tools offered: %v, want the nine built-in and transition", req.ToolNames())
			}
			for _, tool := range req.Tools {
				descs := descriptions(t, tool.Parameters)
				if len(descs) == 0 {
					t.Errorf("%s: no parameter descriptions in %s", tool.Name, tool.Parameters)
				}
				if tt.locale != "ja" {
					continue
				}
				if !hasJapanese(tool.Description) {
					t.Errorf("%s: description not in Japanese: %q", tool.Name, tool.Description)
				}
				for at, d := range descs {
					if !hasJapanese(d) {
						t.Errorf("%s %s: description not in Japanese: %q", tool.Name, at, d)
					}
				}
			}
			if user := req.Messages[1].Text(); !strings.Contains(user, tt.label) {
				t.Errorf("the bot's comment is not labelled %q:\n%s", tt.label, user)
			}
			golden(t, "first_request_"+tt.locale+".txt", renderRequest(t, req))
		})
	}
}

// TestJapaneseToolResults: with locale ja what the tools answer — a Read
// cut to the budget and its continuation hint, a path outside the
// workspace, an Edit whose old_string is not unique, the checklist the
// next step sees — is Japanese.
func TestJapaneseToolResults(t *testing.T) {
	f := newFixture(t, map[string]string{"all-tools": allTools}, func(c *engine.Config) { c.Locale, c.ToolResultMaxTokens = "ja", 2000 })
	var long strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&long, "line %d of the long file\n", i)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "input", "long.txt"), []byte(long.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "input", "twice.txt"), []byte("a\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.srv.Script(
		llmtest.Call("Read", `{"path":"input/long.txt"}`),
		llmtest.Call("Read", `{"path":"../secret.txt"}`),
		llmtest.Call("Edit", `{"path":"input/twice.txt","old_string":"a","new_string":"b"}`),
		llmtest.Call("Checklist", `{"action":"set","name":"plan","items":["読む"]}`),
		llmtest.Transition("check", "読んだ"),
		llmtest.Transition("COMPLETE", "完了"),
	)
	fin := f.run(f.start("all-tools", "読んでください"))
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d requests, want 6", len(reqs))
	}
	result := func(i int) string {
		m := reqs[i].Messages
		return m[len(m)-1].Text()
	}
	read := result(1)
	if !strings.Contains(read, "line 1 of the long file") {
		t.Fatalf("Read result lacks the file's start: %.200q", read)
	}
	hint := read[strings.LastIndex(read, "\n")+1:]
	for _, want := range []string{"トークン予算に合わせて Read を切りました", "offset="} {
		if !strings.Contains(hint, want) {
			t.Errorf("the continuation hint %q lacks %q", hint, want)
		}
	}
	for i, want := range map[int]string{
		2: "Read: ../secret.txt はワークスペースの外です",
		3: "Edit: old_string は input/twice.txt に 2 回現れます",
		4: "### チェックリスト: plan（0/1 完了）",
	} {
		if got := result(i); !strings.Contains(got, want) {
			t.Errorf("result %d = %q, want it to hold %q", i, got, want)
		}
	}
	if user := reqs[5].Messages[1].Text(); !strings.Contains(user, "### チェックリスト: plan（0/1 完了）") {
		t.Errorf("the next step's checklist is not in Japanese:\n%s", user)
	}
}
