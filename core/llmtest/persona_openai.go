package llmtest

import (
	"fmt"
	"net/http"
	"strings"
)

// PersonaOpenAI answers as OpenAI's chat completions do: the reply object
// with refusal, annotations, logprobs and the detailed usage; streams of
// chat.completion.chunk events, each call's id, type and name first with
// empty arguments, the arguments in pieces after it (call after call),
// finish_reason in its own chunk and, with stream_options.include_usage,
// a last chunk with empty choices and the usage, then [DONE].
var PersonaOpenAI = Persona{
	Name:  "openai",
	Title: "OpenAI chat completions, plain and streamed, parallel tool calls",
	Sources: []string{
		"https://platform.openai.com/docs/api-reference/chat/object",
		"https://platform.openai.com/docs/api-reference/chat-streaming/streaming",
		"https://platform.openai.com/docs/guides/function-calling#streaming",
	},
	Model:  "gpt-4.1-mini",
	Body:   func(r Rendered) string { return openaiBody(r, openaiStyle{fingerprint: "fp_b376dfbbd5"}) },
	Stream: func(r Rendered) []string { return openaiStream(r, openaiStyle{fingerprint: "fp_b376dfbbd5"}) },
}

// PersonaOpenAIReasoning is an OpenAI reasoning model whose name says
// nothing of it (a fine-tuned o4-mini): it refuses max_tokens with the
// documented 400 naming max_completion_tokens, and counts reasoning
// tokens in completion_tokens_details.
var PersonaOpenAIReasoning = Persona{
	Name:  "openai",
	Title: "OpenAI reasoning model: max_tokens refused, reasoning tokens counted",
	Sources: []string{
		"https://platform.openai.com/docs/guides/reasoning",
		"https://platform.openai.com/docs/api-reference/chat/create#chat-create-max_completion_tokens",
	},
	Model:  "ft:o4-mini-2025-04-16:acme::b4t0n",
	Body:   func(r Rendered) string { return openaiBody(r, openaiStyle{reasoning: true}) },
	Stream: func(r Rendered) []string { return openaiStream(r, openaiStyle{reasoning: true}) },
	Quirk: func(req Request) (Step, bool) {
		if req.MaxTokensParam != "max_tokens" {
			return Step{}, false // asked right: answered
		}
		return Status(http.StatusBadRequest).WithBody(`{
  "error": {
    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    "type": "invalid_request_error",
    "param": "max_tokens",
    "code": "unsupported_parameter"
  }
}`), true
	},
}

// openaiStyle is what OpenAI-shaped personas vary.
type openaiStyle struct {
	fingerprint string
	reasoning   bool   // completion_tokens_details.reasoning_tokens counts thinking
	choiceExtra string // more fields of a choice (Azure's content_filter_results)
	extra       string // more fields of the reply (Groq's x_groq, llama.cpp's timings)
	first       string // an event before the first chunk (Azure's prompt_filter_results)
	noUsage     bool   // no usage in streams (Ollama)
	usageExtra  string // more fields of usage
	noIndex     bool   // stream tool calls without index (Gemini)
	wholeCalls  bool   // each call whole in one chunk (Ollama, Mistral, Gemini)
	usageInLast bool   // usage in the finish chunk itself (Mistral), not a chunk of its own
	reasoningAs string // the delta field of reasoning: reasoning_content or reasoning
}

func openaiUsage(r Rendered, st openaiStyle) string {
	p, c, cached := usageCounts(r.Usage)
	rt := 0
	if st.reasoning {
		rt = min(c, max(reasoningTokens(r.Reasoning), c/2))
	}
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":%d,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}%s}`,
		p, c, p+c, cached, rt, st.usageExtra)
}

func openaiBody(r Rendered, st openaiStyle) string {
	content := nullable(r.Text)
	if r.Text == "" && len(r.Calls) == 0 {
		content = `""`
	}
	msg := `{"role":"assistant","content":` + content
	if r.Reasoning != "" && st.reasoningAs != "" {
		msg += `,"` + st.reasoningAs + `":` + js(r.Reasoning)
	}
	if len(r.Calls) > 0 {
		msg += `,"tool_calls":` + openaiCalls(r.Calls, false)
	}
	msg += `,"refusal":null,"annotations":[]}`
	usage := ""
	if r.Usage != nil {
		usage = `,"usage":` + openaiUsage(r, st)
	}
	fp := "null"
	if st.fingerprint != "" {
		fp = js(st.fingerprint)
	}
	return fmt.Sprintf(`{"id":%s,"object":"chat.completion","created":1741570283,"model":%s,"choices":[{"index":0,"message":%s,"logprobs":null,"finish_reason":%s%s}]%s,"service_tier":"default","system_fingerprint":%s%s}`,
		js(r.ID), js(r.Model), msg, js(r.Finish), st.choiceExtra, usage, fp, st.extra)
}

func openaiStream(r Rendered, st openaiStyle) []string {
	head := fmt.Sprintf(`"id":%s,"object":"chat.completion.chunk","created":1741570283,"model":%s,"service_tier":"default","system_fingerprint":%s`,
		js(r.ID), js(r.Model), nullable(st.fingerprint))
	chunk := func(delta, finish string) string {
		return `{` + head + `,"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + st.choiceExtra + `}]}`
	}
	var out []string
	if st.first != "" {
		out = append(out, st.first)
	}
	out = append(out, chunk(`{"role":"assistant","content":"","refusal":null}`, "null"))
	if st.reasoningAs != "" {
		for _, p := range pieces(r.Reasoning, r.Piece) {
			out = append(out, chunk(`{"content":null,"`+st.reasoningAs+`":`+js(p)+`}`, "null"))
		}
	}
	for _, p := range pieces(r.Text, r.Piece) {
		out = append(out, chunk(`{"content":`+js(p)+`}`, "null"))
	}
	for i, c := range r.Calls {
		idx := fmt.Sprintf(`"index":%d,`, i)
		if st.noIndex {
			idx = ""
		}
		if st.wholeCalls {
			out = append(out, chunk(fmt.Sprintf(`{"tool_calls":[{%s"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}]}`, idx, js(c.ID), js(c.Name), js(c.Arguments)), "null"))
			continue
		}
		out = append(out, chunk(fmt.Sprintf(`{"tool_calls":[{%s"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]}`, idx, js(c.ID), js(c.Name)), "null"))
		for _, p := range pieces(c.Arguments, r.Piece) {
			out = append(out, chunk(fmt.Sprintf(`{"tool_calls":[{%s"function":{"arguments":%s}}]}`, idx, js(p)), "null"))
		}
	}
	withUsage := r.Usage != nil && !st.noUsage && (r.IncludeUsage || st.usageInLast)
	if st.usageInLast && withUsage {
		last := chunk(`{}`, js(r.Finish))
		out = append(out, strings.TrimSuffix(last, "}")+`,"usage":`+openaiUsage(r, st)+`}`)
	} else {
		out = append(out, chunk(`{}`, js(r.Finish)))
		if withUsage {
			out = append(out, `{`+head+`,"choices":[],"usage":`+openaiUsage(r, st)+st.extra+`}`)
		}
	}
	return append(out, "[DONE]")
}
