package llmtest

import "strings"

// PersonaVLLMHermes answers as vLLM serving a Hermes-style model without
// --enable-auto-tool-choice and a tool parser: the calls come as
// <tool_call>{"name": …, "arguments": {…}}</tool_call> blocks in the
// content, finish_reason stop, no tool_calls.
var PersonaVLLMHermes = Persona{
	Name:  "vllm",
	Title: "vLLM without a tool parser: Hermes tool calls written in the text",
	Sources: []string{
		"https://docs.vllm.ai/en/latest/features/tool_calling.html",
		"https://github.com/NousResearch/Hermes-Function-Calling#prompt-format-for-function-calling",
	},
	Model:  "NousResearch/Hermes-3-Llama-3.1-8B",
	Body:   func(r Rendered) string { return openaiBody(hermes(r), openaiStyle{}) },
	Stream: func(r Rendered) []string { return openaiStream(hermes(r), openaiStyle{}) },
}

// hermes moves r's calls into its text as Hermes writes them.
func hermes(r Rendered) Rendered {
	var b strings.Builder
	b.WriteString(r.Text)
	for _, c := range r.Calls {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(`<tool_call>` + "\n" + `{"name": ` + js(c.Name) + `, "arguments": ` + c.Arguments + "}\n</tool_call>")
	}
	r.Text, r.Calls = b.String(), nil
	if r.Finish == "tool_calls" {
		r.Finish = "stop"
	}
	return r
}
