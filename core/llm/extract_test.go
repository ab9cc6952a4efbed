package llm_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-bot/baton/core/llm"
	"github.com/google/go-cmp/cmp"
)

func knownTools(name string) bool {
	return name == "transition" || name == "Bash" || name == "Read"
}

// call is a found call without its generated id.
type call struct{ Name, Arguments string }

func TestExtractToolCalls(t *testing.T) {
	tests := []struct {
		name     string
		content  string
		want     []call
		wantRest string
	}{
		{
			name:    "bare object, arguments object",
			content: `{"name": "Bash", "arguments": {"command": "ls -la"}}`,
			want:    []call{{"Bash", `{"command":"ls -la"}`}},
		},
		{
			name:    "bare object, arguments as a string",
			content: `{"name":"Bash","arguments":"{\"command\":\"ls\"}"}`,
			want:    []call{{"Bash", `{"command":"ls"}`}},
		},
		{
			name:    "parameters instead of arguments",
			content: `{"name":"Read","parameters":{"path":"a.txt"}}`,
			want:    []call{{"Read", `{"path":"a.txt"}`}},
		},
		{
			name:    "no arguments",
			content: `{"name":"Read"}`,
			want:    []call{{"Read", `{}`}},
		},
		{
			name:    "OpenAI tool_calls entry shape",
			content: `{"id":"x","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"pwd\"}"}}`,
			want:    []call{{"Bash", `{"command":"pwd"}`}},
		},
		{
			name:    "array of calls",
			content: "[{\"name\":\"Read\",\"arguments\":{\"path\":\"a\"}},\n {\"name\":\"transition\",\"arguments\":{\"next_step\":\"COMPLETE\",\"summary\":\"ok\"}}]",
			want:    []call{{"Read", `{"path":"a"}`}, {"transition", `{"next_step":"COMPLETE","summary":"ok"}`}},
		},
		{
			name:    "whole text fenced",
			content: "```json\n{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}\n```",
			want:    []call{{"Bash", `{"command":"ls"}`}},
		},
		{
			name:     "tool_call block after text",
			content:  "I will list the files.\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>",
			want:     []call{{"Bash", `{"command":"ls"}`}},
			wantRest: "I will list the files.",
		},
		{
			name:    "two tool_call blocks",
			content: "<tool_call>{\"name\":\"Read\",\"arguments\":{\"path\":\"a\"}}</tool_call>\n<tool_call>{\"name\":\"Read\",\"arguments\":{\"path\":\"b\"}}</tool_call>",
			want:    []call{{"Read", `{"path":"a"}`}, {"Read", `{"path":"b"}`}},
		},
		{
			name:    "tool_call block without its closing tag",
			content: "<tool_call>\n{\"name\":\"transition\",\"arguments\":{\"next_step\":\"COMPLETE\",\"summary\":\"done\"}}",
			want:    []call{{"transition", `{"next_step":"COMPLETE","summary":"done"}`}},
		},
		{
			name:     "fenced call inside prose",
			content:  "Let me check.\n```json\n{\"name\":\"Bash\",\"arguments\":{\"command\":\"date\"}}\n```\nThen I report.",
			want:     []call{{"Bash", `{"command":"date"}`}},
			wantRest: "Let me check.\n\nThen I report.",
		},
		{
			name:     "unknown tool stays text",
			content:  `{"name":"Delete","arguments":{}}`,
			wantRest: `{"name":"Delete","arguments":{}}`,
		},
		{
			name:     "array with one unknown tool stays text",
			content:  `[{"name":"Read","arguments":{}},{"name":"Delete","arguments":{}}]`,
			wantRest: `[{"name":"Read","arguments":{}},{"name":"Delete","arguments":{}}]`,
		},
		{
			name:     "extra keys are not a call",
			content:  `{"name":"Bash","age":3}`,
			wantRest: `{"name":"Bash","age":3}`,
		},
		{
			name:     "arguments of the wrong type",
			content:  `{"name":"Bash","arguments":[1,2]}`,
			wantRest: `{"name":"Bash","arguments":[1,2]}`,
		},
		{
			name:     "JSON in the middle of prose is not taken",
			content:  `Use {"name":"Bash","arguments":{}} to run it.`,
			wantRest: `Use {"name":"Bash","arguments":{}} to run it.`,
		},
		{
			name:     "plain text",
			content:  "All done.",
			wantRest: "All done.",
		},
		{
			name:     "fenced code that is not a call",
			content:  "```go\nfmt.Println(1)\n```",
			wantRest: "```go\nfmt.Println(1)\n```",
		},
		{
			name:    "Mistral, JSON array after the marker",
			content: `[TOOL_CALLS][{"name": "Read", "arguments": {"path": "a.txt"}}, {"name": "Bash", "arguments": {"command": "ls"}}]</s>`,
			want:    []call{{"Read", `{"path":"a.txt"}`}, {"Bash", `{"command":"ls"}`}},
		},
		{
			name:     "Mistral, name and [ARGS], twice, after text",
			content:  "Looking.\n[TOOL_CALLS]Read[ARGS]{\"path\": \"a.txt\"}[TOOL_CALLS]Bash[CALL_ID]abc123def[ARGS]{\"command\": \"pwd\"}",
			want:     []call{{"Read", `{"path":"a.txt"}`}, {"Bash", `{"command":"pwd"}`}},
			wantRest: "Looking.",
		},
		{
			name:    "Mistral, arguments repaired",
			content: "[TOOL_CALLS]Bash[ARGS]{'command': 'ls',}",
			want:    []call{{"Bash", `{"command":"ls"}`}},
		},
		{
			name:     "Mistral, unknown tool stays text",
			content:  `[TOOL_CALLS]Delete[ARGS]{}`,
			wantRest: `[TOOL_CALLS]Delete[ARGS]{}`,
		},
		{
			name:    "Hermes block with single quotes and a trailing comma",
			content: "<tool_call>\n{'name': 'Bash', 'arguments': {'command': 'ls -la',},}\n</tool_call>",
			want:    []call{{"Bash", `{"command":"ls -la"}`}},
		},
		{
			name:    "raw newline inside a string",
			content: "{\"name\": \"Bash\", \"arguments\": {\"command\": \"echo a\nb\"}}",
			want:    []call{{"Bash", `{"command":"echo a\nb"}`}},
		},
		{
			name:     "Llama 3 function tags",
			content:  "Listing.\n<function=Bash>{\"command\": \"ls\"}</function>\n<function=Read>{'path': 'a',}</function>",
			want:     []call{{"Bash", `{"command":"ls"}`}, {"Read", `{"path":"a"}`}},
			wantRest: "Listing.",
		},
		{
			name:     "function tag naming an unknown tool stays text",
			content:  `<function=Delete>{}</function>`,
			wantRest: `<function=Delete>{}</function>`,
		},
		{
			name:     "malformed block stays text",
			content:  "<tool_call>{\"name\":\"Bash\",</tool_call>",
			wantRest: "<tool_call>{\"name\":\"Bash\",</tool_call>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, rest := llm.ExtractToolCalls(tt.content, knownTools)
			var got []call
			seen := map[string]bool{}
			for _, c := range calls {
				got = append(got, call{c.Name, c.Arguments})
				if c.ID == "" || seen[c.ID] {
					t.Errorf("call id %q is empty or repeated", c.ID)
				}
				seen[c.ID] = true
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if rest != tt.wantRest {
				t.Errorf("rest = %q, want %q", rest, tt.wantRest)
			}
		})
	}
}

func TestExtractToolCallsStableIDs(t *testing.T) {
	content := `{"name":"Bash","arguments":{"command":"ls"}}`
	a, _ := llm.ExtractToolCalls(content, knownTools)
	b, _ := llm.ExtractToolCalls(content, knownTools)
	c, _ := llm.ExtractToolCalls(`{"name":"Bash","arguments":{"command":"pwd"}}`, knownTools)
	if a[0].ID != b[0].ID {
		t.Errorf("ids differ for the same text: %q, %q", a[0].ID, b[0].ID)
	}
	if a[0].ID == c[0].ID {
		t.Errorf("different texts share the id %q", a[0].ID)
	}
}

func FuzzExtractToolCalls(f *testing.F) {
	for _, s := range []string{
		`{"name":"Bash","arguments":{"command":"ls"}}`,
		`[{"name":"Read","parameters":{}}]`,
		"<tool_call>{\"name\":\"Bash\",\"arguments\":\"{}\"}</tool_call>",
		"<tool_call><tool_call></tool_call>",
		"```json\n{\"name\":\"transition\"}\n```",
		"``````",
		"```",
		`{"type":"function","function":{"name":"Bash","arguments":null}}`,
		"text <tool_call>{\"name\":\"Delete\"}",
		"[TOOL_CALLS]Bash[ARGS]{'command': 'ls',}[TOOL_CALLS]",
		"<function=Read>{\"path\": \"a\"}</function><function=",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		calls, rest := llm.ExtractToolCalls(content, knownTools)
		if len(calls) == 0 {
			if rest != content {
				t.Fatalf("no calls but rest %q != content %q", rest, content)
			}
			return
		}
		if len(rest) > len(content) {
			t.Fatalf("rest %q is longer than content %q", rest, content)
		}
		if utf8.ValidString(content) && !utf8.ValidString(rest) {
			t.Fatalf("rest %q is not valid UTF-8", rest)
		}
		for _, c := range calls {
			if !knownTools(c.Name) {
				t.Fatalf("call names unknown tool %q", c.Name)
			}
			if c.ID == "" || !strings.HasPrefix(c.ID, "call_") {
				t.Fatalf("bad id %q", c.ID)
			}
		}
	})
}
