package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
func (Write) Description() string {
	return "Create or overwrite a file in the workspace with the given content; missing folders are created. " +
		"Put files meant for the person in output/. logs/ is read-only."
}

// Schema implements Tool.
func (Write) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path relative to the workspace, e.g. output/report.md"},` +
		`"content":{"type":"string","description":"the whole new content of the file"}},` +
		`"required":["path","content"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t Write) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a writeArgs
	if err := decode(raw, &a); err != nil {
		return failure(t.Name(), err)
	}
	if a.Path == "" {
		return Errorf("Write: path is required")
	}
	p, err := env.WS.ResolveWrite(a.Path)
	if err != nil {
		return failure(t.Name(), err)
	}
	if err := env.WS.WriteFile(a.Path, []byte(a.Content)); err != nil {
		return failure(t.Name(), err)
	}
	return Result{Text: fmt.Sprintf("Wrote %d bytes to %s", len(a.Content), env.WS.Rel(p))}
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
func (Edit) Description() string {
	return "Replace old_string with new_string in a file. old_string must match the file exactly (whitespace " +
		"included, without Read's line numbers) and occur exactly once, unless replace_all is true. " +
		"To create a file use Write."
}

// Schema implements Tool.
func (Edit) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path relative to the workspace"},` +
		`"old_string":{"type":"string","description":"exact text to replace"},` +
		`"new_string":{"type":"string","description":"replacement text"},` +
		`"replace_all":{"type":"boolean","description":"replace every occurrence (default false)"}},` +
		`"required":["path","old_string","new_string"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t Edit) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a editArgs
	if err := decode(raw, &a); err != nil {
		return failure(t.Name(), err)
	}
	n, err := t.edit(env, a)
	if err != nil {
		return failure(t.Name(), err)
	}
	return Result{Text: fmt.Sprintf("Edited %s: replaced %d occurrence(s)", a.Path, n)}
}

func (t Edit) edit(env *Env, a editArgs) (int, error) {
	switch {
	case a.Path == "":
		return 0, errors.New("path is required")
	case a.OldString == "":
		return 0, errors.New("old_string is empty; to create or overwrite a file use Write")
	case a.OldString == a.NewString:
		return 0, errors.New("old_string and new_string are the same; nothing to change")
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
		return 0, fmt.Errorf("old_string was not found in %s; Read the file and copy the text exactly (whitespace and line breaks included, without line numbers)", a.Path)
	case n > 1 && !a.ReplaceAll:
		return 0, fmt.Errorf("old_string occurs %d times in %s; include more surrounding lines to make it unique, or set replace_all to true", n, a.Path)
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
