package llmtest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// A Persona makes the server answer as one provider does: each scripted
// completion step is sent as a body, or a stream, shaped like that
// provider's published examples and documented errors (one file each,
// persona_*.go, naming its sources). A persona can also open with a quirk:
// the documented error the provider sends first (a 400 naming
// max_tokens, a rate limit, an error inside a 200), which a client must
// get past. Error steps and Raw or SSE steps are sent as they are.
type Persona struct {
	// Name is the provider, as llm.provider names it.
	Name string
	// Title says which behaviour the persona shows.
	Title string
	// Sources are the API reference pages the shapes follow.
	Sources []string
	// Model is the model name the persona's examples use.
	Model string
	// Body renders a completion as the provider's JSON reply.
	Body func(r Rendered) string
	// Stream renders a completion as the provider's event stream (the
	// data of each event, without "data: "; comments start with ":").
	Stream func(r Rendered) []string
	// Quirk, when set, answers the first request it returns true for
	// instead of the script's step, which is then kept for the next
	// request.
	Quirk func(req Request) (Step, bool)
	// NoStreamUsage: the persona's streams carry no usage.
	NoStreamUsage bool
}

// Rendered is one scripted completion as a persona renders it: call ids
// are settled (the persona's own style when the step set none).
type Rendered struct {
	ID        string
	Model     string
	Text      string
	Reasoning string
	Calls     []ToolCall
	Finish    string
	Usage     *Usage
	// IncludeUsage: the request asked for usage in the stream.
	IncludeUsage bool
	// Piece is the size of the text and argument pieces of a stream.
	Piece int
}

// SetPersona makes the server answer as p from now on.
func (s *Server) SetPersona(p *Persona) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.persona, s.quirked = p, false
}

// personaStep turns step into the persona's reply to req.
func (s *Server) personaStep(req Request, step Step) (Step, bool) {
	s.mu.Lock()
	p := s.persona
	quirked := s.quirked
	s.mu.Unlock()
	if p == nil || step.Status != 0 || step.Raw != "" || step.SSE != "" {
		return step, false
	}
	if p.Quirk != nil && !quirked {
		if q, ok := p.Quirk(req); ok {
			s.mu.Lock()
			s.quirked = true
			s.mu.Unlock()
			return q, true
		}
	}
	full := s.reply(req, step)
	r := Rendered{ID: full.ID, Model: req.Model, Text: step.Text, Reasoning: step.Reasoning,
		Finish: full.Choices[0].FinishReason, Usage: step.Usage, IncludeUsage: req.IncludeUsage, Piece: step.ChunkBytes}
	if r.Piece <= 0 {
		r.Piece = 8
	}
	for _, c := range full.Choices[0].Message.ToolCalls {
		r.Calls = append(r.Calls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	if req.Stream {
		var b strings.Builder
		for _, e := range p.Stream(r) {
			if strings.HasPrefix(e, ":") {
				b.WriteString(e + "\n\n")
				continue
			}
			b.WriteString("data: " + e + "\n\n")
		}
		return Step{SSE: b.String()}, false
	}
	return Step{Raw: p.Body(r)}, false
}

// Personas lists every persona.
func Personas() []*Persona {
	return []*Persona{
		&PersonaOpenAI, &PersonaOpenAIReasoning, &PersonaAzure, &PersonaOllama, &PersonaVLLMHermes,
		&PersonaLlamaCpp, &PersonaGroq, &PersonaDeepSeek, &PersonaMistral, &PersonaGemini,
		&PersonaAnthropic, &PersonaOpenRouter,
	}
}

// Helpers the personas share.

// js encodes v as JSON (strings escaped as the providers do).
func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// nullable is JSON null for "", else the string.
func nullable(s string) string {
	if s == "" {
		return "null"
	}
	return js(s)
}

// openaiCalls renders calls as a message's tool_calls array.
func openaiCalls(calls []ToolCall, withIndex bool) string {
	var parts []string
	for i, c := range calls {
		idx := ""
		if withIndex {
			idx = fmt.Sprintf(`"index":%d,`, i)
		}
		parts = append(parts, fmt.Sprintf(`{%s"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}`, idx, js(c.ID), js(c.Name), js(c.Arguments)))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// usageCounts returns the step's counts, zero without usage.
func usageCounts(u *Usage) (prompt, completion, cached int) {
	if u == nil {
		return 0, 0, 0
	}
	return u.PromptTokens, u.CompletionTokens, u.CachedTokens
}

// reasoningTokens is a persona's count of thinking tokens for text.
func reasoningTokens(text string) int { return (len(text) + 3) / 4 }
