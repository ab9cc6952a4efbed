package tools

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/baton-bot/baton/core/catalog"
)

// Write creates or replaces a file, creating its folders. It refuses logs/.
type Write struct{}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Name implements Tool.
func (Write) Name() string { return "Write" }

// Description implements Tool.
func (Write) Description(tx *catalog.Texts) string { return tx.Text("tools.write.description") }

// Schema implements Tool.
func (Write) Schema(tx *catalog.Texts) json.RawMessage {
	return schema(tx, "write", `{"type":"object","properties":{`+
		`"path":{"type":"string","description":$path},`+
		`"content":{"type":"string","description":$content}},`+
		`"required":["path","content"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t Write) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a writeArgs
	if err := decode(raw, &a); err != nil {
		return env.fail(t.Name(), "", err)
	}
	if a.Path == "" {
		return env.fail(t.Name(), "", fault("tools.err.path_required"))
	}
	p, err := env.WS.ResolveWrite(a.Path)
	if err != nil {
		return env.fail(t.Name(), a.Path, err)
	}
	if err := env.WS.WriteFile(a.Path, []byte(a.Content)); err != nil {
		return env.fail(t.Name(), a.Path, err)
	}
	return Result{Text: env.say("tools.write.done", "n", itoa(len(a.Content)), "path", env.WS.Rel(p))}
}

// Edit replaces text in a file: old_string must occur exactly once unless
// replace_all is set. It refuses logs/.
type Edit struct{}

type editArgs struct {
	Path       string `json:"path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

// Name implements Tool.
func (Edit) Name() string { return "Edit" }

// Description implements Tool.
func (Edit) Description(tx *catalog.Texts) string { return tx.Text("tools.edit.description") }

// Schema implements Tool.
func (Edit) Schema(tx *catalog.Texts) json.RawMessage {
	return schema(tx, "edit", `{"type":"object","properties":{`+
		`"path":{"type":"string","description":$path},`+
		`"old_string":{"type":"string","description":$old_string},`+
		`"new_string":{"type":"string","description":$new_string},`+
		`"replace_all":{"type":"boolean","description":$replace_all}},`+
		`"required":["path","old_string","new_string"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t Edit) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a editArgs
	if err := decode(raw, &a); err != nil {
		return env.fail(t.Name(), "", err)
	}
	n, err := t.edit(env, a)
	if err != nil {
		return env.fail(t.Name(), a.Path, err)
	}
	return Result{Text: env.say("tools.edit.done", "path", a.Path, "n", itoa(n))}
}

func (t Edit) edit(env *Env, a editArgs) (int, error) {
	switch {
	case a.Path == "":
		return 0, fault("tools.err.path_required")
	case a.OldString == "":
		return 0, fault("tools.edit.empty_old")
	case a.OldString == a.NewString:
		return 0, fault("tools.edit.same")
	}
	if _, err := env.WS.ResolveWrite(a.Path); err != nil {
		return 0, err
	}
	b, err := env.WS.ReadFile(a.Path)
	if err != nil {
		return 0, err
	}
	s := string(b)
	n := strings.Count(s, a.OldString)
	switch {
	case n == 0:
		return 0, fault("tools.edit.not_found", "path", quote(a.Path))
	case n > 1 && !a.ReplaceAll:
		return 0, fault("tools.edit.not_unique", "n", itoa(n), "path", quote(a.Path))
	}
	if a.ReplaceAll {
		s = strings.ReplaceAll(s, a.OldString, a.NewString)
	} else {
		s = strings.Replace(s, a.OldString, a.NewString, 1)
	}
	if err := env.WS.WriteFile(a.Path, []byte(s)); err != nil { // the file keeps its mode
		return 0, err
	}
	return n, nil
}
