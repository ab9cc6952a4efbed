package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of what the model is offered of a server's tool.
const (
	// MaxNameLen is the longest function name OpenAI-compatible APIs
	// accept.
	MaxNameLen = 64
	// MaxDescriptionRunes caps a tool's description.
	MaxDescriptionRunes = 1000
	// maxSchemaBytes caps a tool's adapted input schema; a larger one is
	// offered as its top-level properties only.
	maxSchemaBytes = 16 << 10
	// hashLen is the length of the hash suffix of a shortened name.
	hashLen = 8
)

// toolDef is one of a server's tools as the model is offered it.
type toolDef struct {
	server   string
	remote   string // the name the server knows
	name     string // mcp__<server>__<tool>, shortened and cleaned
	desc     string
	schema   json.RawMessage
	readOnly bool
}

// adaptTools returns the tools of server that allowed lets through, in the
// server's order, named for the model; two tools that would get one name
// are told apart by a hash of the server's name.
func adaptTools(server string, listed []*sdk.Tool, allowed func(string) bool) []toolDef {
	var defs []toolDef
	taken := map[string]bool{}
	for _, t := range listed {
		if t == nil || t.Name == "" || !allowed(t.Name) {
			continue
		}
		name := ToolName(server, t.Name)
		if taken[name] {
			name = hashed("mcp__"+server+"__"+clean(t.Name), server+"\x00"+t.Name)
		}
		taken[name] = true
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		defs = append(defs, toolDef{
			server: server, remote: t.Name, name: name, desc: capRunes(strings.TrimSpace(desc), MaxDescriptionRunes),
			schema:   adaptSchema(t.InputSchema),
			readOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint,
		})
	}
	return defs
}

// ToolName returns the name the model calls the tool of server by:
// mcp__<server>__<tool>, characters function names may not hold replaced
// by _, and a name longer than MaxNameLen cut with a hash of the whole
// name in its last characters, so that it stays the same from run to run
// and unlike the names of the server's other tools.
func ToolName(server, tool string) string {
	name := "mcp__" + server + "__" + clean(tool)
	if len(name) <= MaxNameLen && clean(tool) == tool {
		return name
	}
	// A cleaned name is hashed too: cleaning may have made two names one
	// (a.b, a_b), and the hash of the name the server knows keeps them
	// apart.
	return hashed(name, server+"\x00"+tool)
}

// hashed returns name cut to leave room for _ and a hash of key, within
// MaxNameLen.
func hashed(name, key string) string {
	sum := sha256.Sum256([]byte(key))
	suffix := "_" + hex.EncodeToString(sum[:])[:hashLen]
	if len(name)+len(suffix) > MaxNameLen {
		name = name[:MaxNameLen-len(suffix)]
	}
	return name + suffix
}

// clean replaces what a function name may not hold (^[a-zA-Z0-9_-]+$).
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

// capRunes cuts s to n runes, marked.
func capRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n-1 {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// adaptSchema turns a server's input schema into one OpenAI-compatible
// function calling accepts (it refuses much that JSON Schema allows): the
// top level an object with properties and without $schema, $id or the
// combinators anyOf, oneOf, allOf, not and enum; arrays with items; true
// and false subschemas written as objects. An unreadable schema, or one
// larger than maxSchemaBytes after that, becomes an object that takes any
// properties (the server still validates what it gets). A schema that
// needs none of this is returned as the server wrote it.
func adaptSchema(in any) json.RawMessage {
	loose := json.RawMessage(`{"type":"object","properties":{}}`)
	raw, err := json.Marshal(in)
	if err != nil {
		return loose
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return loose
	}
	for _, k := range []string{"$schema", "$id", "anyOf", "oneOf", "allOf", "not", "enum", "const", "if", "then", "else"} {
		delete(m, k)
	}
	m["type"] = "object"
	props, ok := m["properties"].(map[string]any)
	if !ok {
		props = map[string]any{}
	}
	for k, v := range props {
		props[k] = subschema(v, 0)
	}
	m["properties"] = props
	if req, ok := m["required"].([]any); ok {
		// A required name the properties lack is refused by some providers.
		kept := req[:0]
		for _, r := range req {
			if s, ok := r.(string); ok {
				if _, ok := props[s]; ok {
					kept = append(kept, s)
				}
			}
		}
		if len(kept) == 0 {
			delete(m, "required")
		} else {
			m["required"] = kept
		}
	} else {
		delete(m, "required")
	}
	if ap, ok := m["additionalProperties"]; ok {
		if _, isBool := ap.(bool); !isBool {
			m["additionalProperties"] = subschema(ap, 0)
		}
	}
	for _, defs := range []string{"$defs", "definitions"} {
		if d, ok := m[defs].(map[string]any); ok {
			for k, v := range d {
				d[k] = subschema(v, 0)
			}
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return loose
	}
	if len(out) > maxSchemaBytes {
		names := map[string]any{}
		for k := range props {
			names[k] = map[string]any{}
		}
		if out, err = json.Marshal(map[string]any{"type": "object", "properties": names}); err != nil || len(out) > maxSchemaBytes {
			return loose
		}
	}
	return out
}

// maxDepth bounds how deep subschema walks a schema.
const maxDepth = 32

// subschema adapts a schema below the top: a boolean becomes {} (true) or
// {"not":{}} (false), an array gets items, and the schemas it holds are
// adapted in turn.
func subschema(v any, depth int) any {
	switch s := v.(type) {
	case bool:
		if s {
			return map[string]any{}
		}
		return map[string]any{"not": map[string]any{}}
	case map[string]any:
		if depth >= maxDepth {
			return map[string]any{}
		}
		if isArray(s["type"]) {
			if _, ok := s["items"]; !ok {
				s["items"] = map[string]any{}
			}
		}
		for _, k := range []string{"items", "additionalProperties", "not"} {
			if sub, ok := s[k]; ok {
				if _, isBool := sub.(bool); isBool && k == "additionalProperties" {
					continue
				}
				s[k] = subschema(sub, depth+1)
			}
		}
		for _, k := range []string{"properties", "$defs", "definitions", "patternProperties"} {
			if sub, ok := s[k].(map[string]any); ok {
				for name, p := range sub {
					sub[name] = subschema(p, depth+1)
				}
			}
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf", "prefixItems"} {
			if list, ok := s[k].([]any); ok {
				for i, p := range list {
					list[i] = subschema(p, depth+1)
				}
			}
		}
		return s
	}
	return map[string]any{}
}

// isArray reports a type of "array", alone or in a list of types.
func isArray(t any) bool {
	switch t := t.(type) {
	case string:
		return t == "array"
	case []any:
		for _, x := range t {
			if x == "array" {
				return true
			}
		}
	}
	return false
}
