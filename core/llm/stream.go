package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Streaming: Baton sends the request itself and reads the server-sent
// event stream with its own decoder (sseReader), which takes what real
// servers send: comments (": OPENROUTER PROCESSING"), blank keep-alive
// lines, CRLF line ends, events split anywhere by the network (inside a
// UTF-8 character too: bytes are gathered up to the line's end before
// anything is decoded), data split over several data: lines, and the
// closing "data: [DONE]". Deltas are assembled into one Response:
// content in order, tool calls by their index (arguments arriving in
// pieces, several calls interleaved), usage from the chunk that carries
// it (the last one, with stream_options.include_usage).

// maxEvent bounds one event of a stream: a tool call's arguments arrive in
// pieces, but some servers send a whole call in one event.
const maxEvent = 64 << 20

// errorBodyMax bounds what is read of an error answer.
const errorBodyMax = 1 << 20

// streamAttempt sends body (a stream request) once and assembles the
// answer, passing text deltas to onText when it is not nil.
func (c *Client) streamAttempt(ctx context.Context, body *Body, onText func(string)) (Response, *failure) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.baseURL+"/chat/completions", nil)
	if err != nil {
		return Response{}, &failure{err: errors.New(c.redact(err.Error()))}
	}
	body.into(hreq)
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	c.profile.decorate(hreq, c.apiKey)
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return Response{}, c.classify(actx, &exchange{}, err)
	}
	defer resp.Body.Close()
	x := &exchange{header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyMax))
		return Response{}, c.statusFailure(c.statusError(resp.StatusCode, resp.Header, raw), x, isHTML(resp.Header, raw))
	}
	if !strings.Contains(strings.ToLower(resp.Header.Get("Content-Type")), "event-stream") {
		// A server that ignores stream: true answers with the whole reply.
		return c.plainReply(actx, x, resp.Body)
	}
	var a assembler
	r := newSSEReader(resp.Body)
	for {
		data, err := r.next()
		if err != nil {
			if a.finished() && actx.Err() == nil {
				// Ended (or broke) after the finish reason, without [DONE]
				// or usage: the answer is whole; usage is then estimated.
				break
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			if actx.Err() != nil {
				return Response{}, c.classify(actx, x, actx.Err())
			}
			return Response{}, &failure{retry: true, reason: "the stream stopped before the reply was complete",
				err: fmt.Errorf("read stream: %s", c.redact(err.Error()))}
		}
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			break
		}
		if f := c.errorIn200(data); f != nil {
			return Response{}, f
		}
		var ch streamChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return Response{}, &failure{retry: true, reason: "a stream that could not be read",
				err: fmt.Errorf("read stream: %s: %s", err, clip(c.redact(string(data)), 200))}
		}
		a.add(ch, onText)
	}
	if !a.started {
		return Response{}, &failure{retry: true, reason: "an empty reply", err: errors.New("the stream has no choices")}
	}
	if a.finish == "error" {
		// OpenRouter's provider failed mid-answer (without an error object).
		return Response{}, &failure{retry: true, reason: "the provider failed mid-answer",
			err: errors.New("the stream ended with finish_reason error")}
	}
	return a.response(), nil
}

// plainReply reads a whole JSON reply sent where a stream was asked for.
func (c *Client) plainReply(actx context.Context, x *exchange, body io.Reader) (Response, *failure) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return Response{}, c.classify(actx, x, err)
	}
	if isHTML(x.header, raw) {
		return Response{}, &failure{kind: KindNotAPI, reason: "an HTML page", err: errors.New("the reply is an HTML page")}
	}
	if f := c.errorIn200(raw); f != nil {
		return Response{}, f
	}
	var ch streamChunk
	if err := json.Unmarshal(raw, &ch); err != nil {
		return Response{}, &failure{retry: true, reason: "a reply that could not be read",
			err: fmt.Errorf("read reply: %s", err)}
	}
	var a assembler
	for i := range ch.Choices {
		if m := ch.Choices[i].Message; m != nil {
			ch.Choices[i].Delta = *m
		}
	}
	a.add(ch, nil)
	if !a.started {
		return Response{}, &failure{retry: true, reason: "an empty reply", err: errors.New("the reply has no choices")}
	}
	return a.response(), nil
}

// wireError is the error object OpenAI-compatible servers send, at the
// top of an error answer, or of a 200 answer or stream event (OpenRouter,
// when the provider behind it failed).
type wireError struct {
	Error *struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
}

// errorIn200 returns the failure for a 200 answer (or stream event) whose
// body is an error object, nil when it is not one. A numeric code in the
// object is taken as the status (OpenRouter sends the provider's); a
// rate-limit code as a 429; another named code (context_length_exceeded,
// invalid_request_error) as a 400; none, or a server error's, as a 502,
// another try worth making.
func (c *Client) errorIn200(raw []byte) *failure {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !bytes.Contains(raw, []byte(`"error"`)) {
		return nil
	}
	var w wireError
	if json.Unmarshal(raw, &w) != nil || w.Error == nil {
		return nil
	}
	se := c.wireStatus(0, w)
	if se.StatusCode < 400 {
		code := strings.ToLower(se.Code)
		switch {
		case strings.Contains(code, "rate_limit"), strings.Contains(code, "quota"):
			se.StatusCode = http.StatusTooManyRequests
		case code == "", strings.Contains(code, "server"), strings.Contains(code, "overloaded"), strings.Contains(code, "unavailable"):
			se.StatusCode = http.StatusBadGateway
		default:
			se.StatusCode = http.StatusBadRequest
		}
	}
	f := c.statusFailure(se, &exchange{}, false)
	f.reason = "an error inside a 200 reply: " + f.reason
	return f
}

// statusError reads an error answer's body.
func (c *Client) statusError(status int, h http.Header, raw []byte) *StatusError {
	if isHTML(h, raw) {
		return &StatusError{StatusCode: status, Message: "an HTML page"}
	}
	var w wireError
	if json.Unmarshal(raw, &w) == nil && w.Error != nil {
		se := c.wireStatus(status, w)
		se.StatusCode = status
		return se
	}
	var list []wireError // Gemini: [{"error": {…}}]
	if json.Unmarshal(raw, &list) == nil && len(list) > 0 && list[0].Error != nil {
		se := c.wireStatus(status, list[0])
		se.StatusCode = status
		return se
	}
	// Some servers send a bare {"error":"text"} or plain text.
	var bare struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &bare) == nil && bare.Error != "" {
		msg = bare.Error
	}
	return &StatusError{StatusCode: status, Message: clip(c.redact(msg), 300)}
}

// wireStatus turns an error object into a StatusError; a numeric code is
// the status, else status is.
func (c *Client) wireStatus(status int, w wireError) *StatusError {
	se := &StatusError{StatusCode: status, Message: clip(c.redact(w.Error.Message), 500)}
	var code string
	var n int
	switch {
	case json.Unmarshal(w.Error.Code, &code) == nil:
		se.Code = code
		if v, err := strconv.Atoi(code); err == nil {
			n = v
		}
	case json.Unmarshal(w.Error.Code, &n) == nil:
	}
	if n >= 400 && n < 600 {
		se.StatusCode = n
	}
	if se.Code == "" && w.Error.Type != "" && n == 0 {
		se.Code = w.Error.Type
	}
	return se
}

// streamChunk is one event of a stream (or, with Message, a whole reply).
type streamChunk struct {
	Choices []struct {
		Index        int          `json:"index"`
		Delta        streamDelta  `json:"delta"`
		Message      *streamDelta `json:"message"`
		FinishReason *string      `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
	// XGroq carries Groq's usage in a stream's last chunk.
	XGroq *struct {
		Usage *wireUsage `json:"usage"`
	} `json:"x_groq"`
}

type streamDelta struct {
	Content          *string          `json:"content"`
	ReasoningContent *string          `json:"reasoning_content"`
	Reasoning        *string          `json:"reasoning"`
	ToolCalls        []streamToolCall `json:"tool_calls"`
	FunctionCall     *struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function_call"`
}

type streamToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// wireUsage is the usage object, details included.
type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// PromptCacheHitTokens is DeepSeek's name for the cached prompt tokens.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
	PromptTokensDetails  *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// assembler gathers a stream's deltas into one answer (choice 0 only).
type assembler struct {
	started   bool // a choice was seen
	content   strings.Builder
	reasoning strings.Builder
	calls     map[int]*ToolCall
	order     []int // call indexes in order of first appearance
	last      int   // the index of the call a delta without index continues
	finish    string
	usage     *wireUsage
}

func (a *assembler) finished() bool { return a.finish != "" }

func (a *assembler) add(ch streamChunk, onText func(string)) {
	if ch.Usage != nil {
		a.usage = ch.Usage
	} else if ch.XGroq != nil && ch.XGroq.Usage != nil {
		a.usage = ch.XGroq.Usage
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue
		}
		a.started = true
		d := c.Delta
		if d.Content != nil && *d.Content != "" {
			a.content.WriteString(*d.Content)
			if onText != nil {
				onText(*d.Content)
			}
		}
		if d.ReasoningContent != nil {
			a.reasoning.WriteString(*d.ReasoningContent)
		} else if d.Reasoning != nil {
			a.reasoning.WriteString(*d.Reasoning)
		}
		for _, tc := range d.ToolCalls {
			a.addCall(tc)
		}
		if fc := d.FunctionCall; fc != nil && (fc.Name != "" || fc.Arguments != "") {
			i := -1 // the legacy function_call: one call
			a.addCall(streamToolCall{Index: &i, Function: struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			}{fc.Name, fc.Arguments}})
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			a.finish = *c.FinishReason
		}
	}
}

// addCall adds one tool-call delta: a new index (or, without an index, a
// new id) opens a call; the rest continue the call of their index.
func (a *assembler) addCall(tc streamToolCall) {
	if a.calls == nil {
		a.calls = map[int]*ToolCall{}
	}
	i := a.last
	switch {
	case tc.Index != nil:
		i = *tc.Index
	case len(a.order) == 0,
		tc.ID != "" && a.calls[i].ID != tc.ID,
		tc.ID == "" && tc.Function.Name != "" && a.calls[i].Name != "":
		// Without an index: a new id, or a new name where the call has
		// one (Gemini sends each call whole, without index or id).
		i = len(a.order)
		for a.calls[i] != nil {
			i++
		}
	}
	call := a.calls[i]
	if call == nil {
		call = &ToolCall{}
		a.calls[i] = call
		a.order = append(a.order, i)
	}
	a.last = i
	if tc.ID != "" && call.ID == "" {
		call.ID = tc.ID
	}
	if tc.Function.Name != "" && call.Name == "" {
		call.Name = tc.Function.Name
	}
	call.Arguments += tc.Function.Arguments
}

func (a *assembler) response() Response {
	msg := Message{Role: RoleAssistant, Content: a.content.String(), Reasoning: a.reasoning.String()}
	idx := append([]int(nil), a.order...)
	sort.Ints(idx)
	for n, i := range idx {
		tc := *a.calls[i]
		if tc.ID == "" {
			tc.ID = callID(tc.Name+tc.Arguments+msg.Content, n)
		}
		msg.ToolCalls = append(msg.ToolCalls, tc)
	}
	r := Response{Message: msg, FinishReason: a.finish}
	if u := a.usage; u != nil {
		r.Usage = Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, Reported: true}
		if d := u.PromptTokensDetails; d != nil {
			r.Usage.CachedTokens = d.CachedTokens
		}
		if r.Usage.CachedTokens == 0 {
			r.Usage.CachedTokens = max(u.PromptCacheHitTokens, 0)
		}
		if d := u.CompletionTokensDetails; d != nil {
			r.Usage.ReasoningTokens = d.ReasoningTokens
		}
	}
	return r
}

// sseReader reads the data of server-sent events.
type sseReader struct {
	r    *bufio.Reader
	data []byte
	line []byte
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the data of the next event that has any; io.EOF when the
// stream ends (an event not closed by a blank line is returned first).
func (s *sseReader) next() ([]byte, error) {
	s.data = s.data[:0]
	has := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && has {
				return s.data, nil
			}
			return nil, err
		}
		switch {
		case len(line) == 0:
			if has {
				return s.data, nil
			}
		case line[0] == ':':
			// a comment: a keep-alive or a proxy's note
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) != "data" {
				continue // event:, id:, retry:
			}
			if has {
				s.data = append(s.data, '\n')
			}
			if len(s.data)+len(value) > maxEvent {
				return nil, fmt.Errorf("a stream event of more than %d MiB", maxEvent>>20)
			}
			s.data = append(s.data, value...)
			has = true
		}
	}
}

// readLine returns the next line without its end (LF, CRLF).
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		frag, err := s.r.ReadSlice('\n')
		if len(s.line)+len(frag) > maxEvent {
			return nil, fmt.Errorf("a stream line of more than %d MiB", maxEvent>>20)
		}
		s.line = append(s.line, frag...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(s.line, []byte("\n")), []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(s.line) > 0:
			return bytes.TrimSuffix(s.line, []byte("\r")), nil
		default:
			return nil, err
		}
	}
}
