package llm

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ExtractToolCalls finds tool calls that a model wrote into its text instead
// of the tool_calls field. It recognises, in this order of preference:
//
//   - <tool_call>…</tool_call> blocks anywhere in the text (a missing
//     closing tag runs to the end of the text);
//   - the whole text being a call: a JSON object {"name": …, "arguments": …}
//     (arguments an object or a JSON-encoded string; "parameters" is accepted
//     for "arguments", and {"type":"function","function":{…}} too) or a JSON
//     array of such objects, bare or inside one ``` fence;
//   - Mistral's [TOOL_CALLS] marker, followed by a JSON array of calls
//     ([TOOL_CALLS][{"name": …, "arguments": …}]) or by a name and its
//     arguments ([TOOL_CALLS]name[ARGS]{…}, with an optional [CALL_ID]id
//     before [ARGS]), once per call;
//   - Llama 3's <function=name>{…}</function>, anywhere in the text;
//   - ``` fenced blocks anywhere in the text that hold nothing but calls.
//
// JSON that does not parse gets one repair attempt (RepairJSON) before the
// candidate is given up.
//
// A candidate counts only when every call in it names a tool for which known
// returns true and carries no keys beyond those above; otherwise it stays
// text. The calls come back in order with ids derived from the text, and rest
// is the text left once they are removed, trimmed. When nothing is found,
// calls is nil and rest is content unchanged. known must not be nil.
func ExtractToolCalls(content string, known func(string) bool) (calls []ToolCall, rest string) {
	var raw []rawCall
	rest = content
	if r, found, ok := extractTagged(content, known); ok {
		raw, rest = found, r
	} else if r, found, ok := extractMistral(content, known); ok {
		raw, rest = found, r
	} else if r, found, ok := extractFunctionTags(content, known); ok {
		raw, rest = found, r
	} else if found, ok := parseCalls(unfence(strings.TrimSpace(content)), known); ok {
		raw, rest = found, ""
	} else if r, found, ok := extractFenced(content, known); ok {
		raw, rest = found, r
	}
	if len(raw) == 0 {
		return nil, content
	}
	calls = make([]ToolCall, len(raw))
	for i, c := range raw {
		calls[i] = ToolCall{ID: callID(content, i), Name: c.name, Arguments: c.args}
	}
	return calls, rest
}

type rawCall struct{ name, args string }

const (
	openTag  = "<tool_call>"
	closeTag = "</tool_call>"
	fence    = "```"
)

// extractTagged takes out every <tool_call> block that holds calls.
func extractTagged(s string, known func(string) bool) (rest string, calls []rawCall, ok bool) {
	var b strings.Builder
	noClose := false // no closing tag is left: spares rescanning for one
	for {
		i := strings.Index(s, openTag)
		if i < 0 {
			b.WriteString(s)
			break
		}
		body := s[i+len(openTag):]
		after := ""
		if !noClose {
			if j := strings.Index(body, closeTag); j >= 0 {
				body, after = body[:j], body[j+len(closeTag):]
			} else {
				noClose = true
			}
		}
		found, good := parseCalls(unfence(strings.TrimSpace(body)), known)
		if good {
			b.WriteString(s[:i])
			calls = append(calls, found...)
			s = after
			continue
		}
		// Not a call: keep the opening tag as text and look further.
		b.WriteString(s[:i+len(openTag)])
		s = s[i+len(openTag):]
	}
	if len(calls) == 0 {
		return "", nil, false
	}
	return strings.TrimSpace(b.String()), calls, true
}

// extractFenced takes out every ``` block that holds nothing but calls.
func extractFenced(s string, known func(string) bool) (rest string, calls []rawCall, ok bool) {
	var b strings.Builder
	for {
		i := strings.Index(s, fence)
		if i < 0 {
			b.WriteString(s)
			break
		}
		j := strings.Index(s[i+len(fence):], fence)
		if j < 0 {
			b.WriteString(s)
			break
		}
		end := i + len(fence) + j + len(fence)
		if found, good := parseCalls(unfence(s[i:end]), known); good {
			b.WriteString(s[:i])
			calls = append(calls, found...)
		} else {
			b.WriteString(s[:end])
		}
		s = s[end:]
	}
	if len(calls) == 0 {
		return "", nil, false
	}
	return strings.TrimSpace(b.String()), calls, true
}

// unfence returns the body of s when s is exactly one ``` fenced block
// (with an optional language tag), else s.
func unfence(s string) string {
	if !strings.HasPrefix(s, fence) || !strings.HasSuffix(s, fence) || len(s) < 2*len(fence) {
		return s
	}
	body := s[len(fence) : len(s)-len(fence)]
	if strings.Contains(body, fence) {
		return s
	}
	if nl := strings.IndexByte(body, '\n'); nl >= 0 && !strings.ContainsAny(body[:nl], "{[") {
		body = body[nl+1:] // the language tag line, e.g. "json"
	}
	return strings.TrimSpace(body)
}

// parseCalls reads s as one call object or an array of them.
func parseCalls(s string, known func(string) bool) ([]rawCall, bool) {
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	if !json.Valid([]byte(s)) {
		fixed, ok := RepairJSON(s)
		if !ok {
			return nil, false
		}
		s = fixed
	}
	if s[0] == '{' {
		c, ok := parseCall([]byte(s), known)
		if !ok {
			return nil, false
		}
		return []rawCall{c}, true
	}
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(s), &items); err != nil || len(items) == 0 {
		return nil, false
	}
	calls := make([]rawCall, 0, len(items))
	for _, it := range items {
		c, ok := parseCall(it, known)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, true
}

// callKeys are the keys a call object may carry.
var callKeys = map[string]bool{"name": true, "arguments": true, "parameters": true, "id": true, "type": true, "function": true}

func parseCall(data []byte, known func(string) bool) (rawCall, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return rawCall{}, false
	}
	for k := range obj {
		if !callKeys[k] {
			return rawCall{}, false
		}
	}
	if fn, ok := obj["function"]; ok {
		// {"type":"function","function":{"name":…,"arguments":…}}
		if _, hasName := obj["name"]; hasName {
			return rawCall{}, false
		}
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(fn, &inner); err != nil || inner == nil {
			return rawCall{}, false
		}
		for k := range inner {
			if k != "name" && k != "arguments" && k != "parameters" {
				return rawCall{}, false
			}
		}
		obj = inner
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || name == "" || !known(name) {
		return rawCall{}, false
	}
	argsRaw, ok := obj["arguments"]
	if !ok {
		argsRaw = obj["parameters"]
	}
	args, ok := arguments(argsRaw)
	if !ok {
		return rawCall{}, false
	}
	return rawCall{name: name, args: args}, true
}

// arguments normalises a call's arguments to the text a tool_calls entry
// would carry: an object compacted, a string taken as the model wrote it,
// absent or null as "{}".
func arguments(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", true
	}
	switch raw[0] {
	case '{':
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return "", false
		}
		return b.String(), true
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false
		}
		return s, true
	}
	return "", false
}

// Mistral's markers of a call written as text.
const (
	mistralCalls  = "[TOOL_CALLS]"
	mistralArgs   = "[ARGS]"
	mistralCallID = "[CALL_ID]"
)

// extractMistral takes out the calls after a [TOOL_CALLS] marker: the text
// before the first marker is what is left; anything after the calls (an
// end-of-sequence token, say) is dropped.
func extractMistral(s string, known func(string) bool) (rest string, calls []rawCall, ok bool) {
	i := strings.Index(s, mistralCalls)
	if i < 0 {
		return "", nil, false
	}
	rest, s = strings.TrimSpace(s[:i]), s[i:]
	for strings.HasPrefix(s, mistralCalls) {
		s = strings.TrimSpace(s[len(mistralCalls):])
		if s != "" && (s[0] == '[' || s[0] == '{') {
			// [TOOL_CALLS][{"name":…,"arguments":…}]
			value, after := jsonValue(s)
			found, good := parseCalls(value, known)
			if !good {
				return "", nil, false
			}
			calls = append(calls, found...)
			s = strings.TrimSpace(after)
			continue
		}
		// [TOOL_CALLS]name[CALL_ID]id[ARGS]{…}
		j := strings.Index(s, mistralArgs)
		if j < 0 {
			return "", nil, false
		}
		name := s[:j]
		if k := strings.Index(name, mistralCallID); k >= 0 {
			name = name[:k]
		}
		name = strings.TrimSpace(name)
		if name == "" || !known(name) {
			return "", nil, false
		}
		value, after := jsonValue(strings.TrimSpace(s[j+len(mistralArgs):]))
		if !json.Valid([]byte(value)) {
			fixed, good := RepairJSON(value)
			if !good {
				return "", nil, false
			}
			value = fixed
		}
		args, good := arguments(json.RawMessage(value))
		if !good {
			return "", nil, false
		}
		calls = append(calls, rawCall{name: name, args: args})
		s = strings.TrimSpace(after)
	}
	if len(calls) == 0 {
		return "", nil, false
	}
	return rest, calls, true
}

// jsonValue splits s, which starts with a JSON value, after that value:
// up to the next Mistral marker when the value does not parse (for a
// repair attempt), the whole of s when there is none.
func jsonValue(s string) (value, after string) {
	dec := json.NewDecoder(strings.NewReader(s))
	var v json.RawMessage
	if err := dec.Decode(&v); err == nil {
		n := int(dec.InputOffset())
		return s[:n], s[n:]
	}
	if k := strings.Index(s, mistralCalls); k >= 0 {
		return strings.TrimSpace(s[:k]), s[k:]
	}
	return s, ""
}

// Llama 3's markers of a call written as text.
const (
	functionOpen  = "<function="
	functionClose = "</function>"
)

// extractFunctionTags takes out every <function=name>{…}</function> that
// names a known tool with arguments that parse (or can be repaired).
func extractFunctionTags(s string, known func(string) bool) (rest string, calls []rawCall, ok bool) {
	var b strings.Builder
	for {
		i := strings.Index(s, functionOpen)
		if i < 0 {
			b.WriteString(s)
			break
		}
		after := s[i+len(functionOpen):]
		gt := strings.IndexByte(after, '>')
		end := strings.Index(after, functionClose)
		if gt < 0 || end < gt {
			b.WriteString(s)
			break
		}
		name := strings.TrimSpace(after[:gt])
		body := strings.TrimSpace(after[gt+1 : end])
		if !json.Valid([]byte(body)) {
			if fixed, good := RepairJSON(body); good {
				body = fixed
			}
		}
		args, good := arguments(json.RawMessage(body))
		if name == "" || !known(name) || !good {
			b.WriteString(s[:i+len(functionOpen)])
			s = after
			continue
		}
		b.WriteString(s[:i])
		calls = append(calls, rawCall{name: name, args: args})
		s = after[end+len(functionClose):]
	}
	if len(calls) == 0 {
		return "", nil, false
	}
	return strings.TrimSpace(b.String()), calls, true
}

// LooksLikeToolCall reports whether content, in which no call was found
// for the offered tools, still looks like an attempt at one: a
// <tool_call>, [TOOL_CALLS] or <function= marker, a call naming a tool
// that was not offered, or text that is a JSON object or array with a
// tool's name ("name", "tool", "function") and its arguments ("arguments",
// "parameters", "args", "input"). The
// model is then told how to write a call instead of being taken at its
// word.
func LooksLikeToolCall(content string) bool {
	if strings.Contains(content, openTag) || strings.Contains(content, mistralCalls) || strings.Contains(content, functionOpen) {
		return true
	}
	if calls, _ := ExtractToolCalls(content, func(string) bool { return true }); len(calls) > 0 {
		return true
	}
	t := unfence(strings.TrimSpace(content))
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return false
	}
	// A JSON answer (a record with a "name") is not a call: a call names
	// a tool and gives it arguments.
	has := func(keys ...string) bool {
		for _, k := range keys {
			if strings.Contains(t, `"`+k+`"`) || strings.Contains(t, `'`+k+`'`) {
				return true
			}
		}
		return false
	}
	return has("name", "tool", "function") && has("arguments", "parameters", "args", "input", "function")
}
