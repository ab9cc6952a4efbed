package llmtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// The stream's wire form, as OpenAI documents chat.completion.chunk.
type (
	wireChunk struct {
		ID      string            `json:"id"`
		Object  string            `json:"object"`
		Created int64             `json:"created"`
		Model   string            `json:"model"`
		Choices []wireChunkChoice `json:"choices"`
		Usage   *wireUsage        `json:"usage,omitempty"`
	}
	wireChunkChoice struct {
		Index        int       `json:"index"`
		Delta        wireDelta `json:"delta"`
		FinishReason *string   `json:"finish_reason"`
	}
	wireDelta struct {
		Role             string              `json:"role,omitempty"`
		Content          *string             `json:"content,omitempty"`
		ReasoningContent *string             `json:"reasoning_content,omitempty"`
		ToolCalls        []wireToolCallDelta `json:"tool_calls,omitempty"`
	}
	wireToolCallDelta struct {
		Index    int           `json:"index"`
		ID       string        `json:"id,omitempty"`
		Type     string        `json:"type,omitempty"`
		Function wireFuncDelta `json:"function"`
	}
	wireFuncDelta struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
)

// Events returns the data of the events the server streams for step in
// answer to req, [DONE] included: a first chunk with the role, the
// reasoning and text in pieces, each call's header (id, name) then its
// arguments in pieces (in turns when Interleave), a chunk with the finish
// reason, and one with usage when the request asked for it.
func (s *Server) Events(req Request, step Step) []string {
	full := s.reply(req, step)
	size := step.ChunkBytes
	if size <= 0 {
		size = 8
	}
	base := wireChunk{ID: full.ID, Object: "chat.completion.chunk", Created: full.Created, Model: full.Model}
	var out []string
	emit := func(d wireDelta, finish *string) {
		c := base
		c.Choices = []wireChunkChoice{{Delta: d, FinishReason: finish}}
		b, _ := json.Marshal(c)
		out = append(out, string(b))
	}
	emit(wireDelta{Role: "assistant", Content: ptr("")}, nil)
	for _, p := range pieces(step.Reasoning, size) {
		emit(wireDelta{ReasoningContent: ptr(p)}, nil)
	}
	for _, p := range pieces(step.Text, size) {
		emit(wireDelta{Content: ptr(p)}, nil)
	}
	calls := full.Choices[0].Message.ToolCalls
	args := make([][]string, len(calls))
	for i, c := range calls {
		args[i] = pieces(c.Function.Arguments, size)
		if !step.Interleave || i == 0 {
			emit(wireDelta{ToolCalls: []wireToolCallDelta{{Index: i, ID: c.ID, Type: "function", Function: wireFuncDelta{Name: c.Function.Name}}}}, nil)
		}
		if !step.Interleave {
			for _, p := range args[i] {
				emit(wireDelta{ToolCalls: []wireToolCallDelta{{Index: i, Function: wireFuncDelta{Arguments: p}}}}, nil)
			}
		}
	}
	if step.Interleave {
		for i := 1; i < len(calls); i++ {
			c := calls[i]
			emit(wireDelta{ToolCalls: []wireToolCallDelta{{Index: i, ID: c.ID, Type: "function", Function: wireFuncDelta{Name: c.Function.Name}}}}, nil)
		}
		for n := 0; ; n++ {
			more := false
			for i := range calls {
				if n < len(args[i]) {
					more = true
					emit(wireDelta{ToolCalls: []wireToolCallDelta{{Index: i, Function: wireFuncDelta{Arguments: args[i][n]}}}}, nil)
				}
			}
			if !more {
				break
			}
		}
	}
	finish := full.Choices[0].FinishReason
	emit(wireDelta{}, &finish)
	if req.IncludeUsage && full.Usage != nil && !step.NoStreamUsage {
		c := base
		c.Choices = []wireChunkChoice{}
		c.Usage = full.Usage
		b, _ := json.Marshal(c)
		out = append(out, string(b))
	}
	return append(out, "[DONE]")
}

func ptr(s string) *string { return &s }

// pieces cuts s into pieces of about n bytes on character boundaries.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// serveStream answers a stream request as the step says.
func (s *Server) serveStream(w http.ResponseWriter, req Request, step Step) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	var body strings.Builder
	if step.SSE != "" {
		body.WriteString(step.SSE)
	} else {
		events := s.Events(req, step)
		if step.KeepAlives {
			body.WriteString(": keep-alive\n\n")
		}
		for i, e := range events {
			if step.CutAfter > 0 && i == step.CutAfter {
				break
			}
			body.WriteString("data: " + e + "\n\n")
			if step.KeepAlives {
				body.WriteString(": OPENROUTER PROCESSING\n\n\n")
			}
		}
	}
	flusher, _ := w.(http.Flusher)
	text := body.String()
	n := step.WriteBytes
	if n <= 0 {
		n = len(text)
	}
	for len(text) > 0 {
		k := min(n, len(text))
		if _, err := io.WriteString(w, text[:k]); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		text = text[k:]
	}
	if step.CutAfter > 0 && step.SSE == "" {
		// Break the connection: the client sees the body end without
		// the chunked encoding's last chunk.
		panic(http.ErrAbortHandler)
	}
}
