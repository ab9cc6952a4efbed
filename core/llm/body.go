package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	openai "github.com/sashabaranov/go-openai"
)

// Baton encodes the chat completion body itself and go-openai carries it.
//
// go-openai's messages implement json.Marshaler, and encoding/json re-scans
// (compacts) every Marshaler's output: building the body of a 100k-token
// conversation that way takes about five times as long as encoding plain
// structs, and the engine pays it on every turn. So Complete hands go-openai
// a request without its messages and tools — go-openai still validates the
// model and the token limits, sends, retries nothing, decodes the reply and
// its errors — and the recorder puts the body built here on the wire.
// The body is the cached encodings of the messages read one after the
// other (Body), so a turn of a million-token movement does not copy its
// 3.8 MB into one buffer before the transport copies it again.

// bodyRequest is the JSON of a chat completion request.
type bodyRequest struct {
	Model               string             `json:"model"`
	Messages            []bodyMessage      `json:"messages"`
	MaxTokens           int                `json:"max_tokens,omitempty"`
	MaxCompletionTokens int                `json:"max_completion_tokens,omitempty"`
	Tools               []bodyTool         `json:"tools,omitempty"`
	ToolChoice          string             `json:"tool_choice,omitempty"`
	ReasoningEffort     string             `json:"reasoning_effort,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *bodyStreamOptions `json:"stream_options,omitempty"`
	// Options are Ollama's model options; other servers are not sent it.
	Options *bodyOllama `json:"options,omitempty"`
}

// bodyOllama are the Ollama options Baton sets (Config.NumCtx).
type bodyOllama struct {
	NumCtx int `json:"num_ctx,omitempty"`
}

// bodyStreamOptions asks a streaming server for usage in the last chunk.
type bodyStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type bodyMessage struct {
	Role string `json:"role"`
	// Content is a string, a []bodyPart, or nil (omitted: an assistant
	// message that only calls tools).
	Content    any            `json:"content,omitempty"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []bodyToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	// ReasoningContent goes back only where the provider requires it
	// (bodyOptions.reasoningBack).
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type bodyPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *bodyImageURL `json:"image_url,omitempty"`
}

type bodyImageURL struct {
	URL string `json:"url"`
}

type bodyToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function bodyFunction `json:"function"`
}

type bodyFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type bodyTool struct {
	Type     string          `json:"type"`
	Function bodyFunctionDef `json:"function"`
}

type bodyFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// bodyOptions are the client's choices that shape a body.
type bodyOptions struct {
	stream bool // a server-sent event stream, with usage
	// reasoningBack sends the reasoning of the assistant messages that
	// called tools since the last user message (DeepSeek's thinking mode
	// wants it back within the turn, and not after).
	reasoningBack bool
	effort        string // reasoning_effort, "" for none
	numCtx        int    // > 0: sent as options.num_ctx (Ollama)
}

// encodeBody returns the JSON body for req, whose model and token limit
// wreq (go-openai's validated request) already settled. The messages come
// from cache, which encodes only those it has not seen (msgcache.go); a nil
// cache encodes them all. The body shares the cached encodings, which are
// never changed.
func encodeBody(cache *msgCache, req Request, wreq openai.ChatCompletionRequest, o bodyOptions) (*Body, error) {
	b := bodyRequest{
		Model: wreq.Model, MaxTokens: wreq.MaxTokens, MaxCompletionTokens: wreq.MaxCompletionTokens,
		ReasoningEffort: o.effort,
	}
	if o.stream {
		b.Stream, b.StreamOptions = true, &bodyStreamOptions{IncludeUsage: true}
	}
	if o.numCtx > 0 {
		b.Options = &bodyOllama{NumCtx: o.numCtx}
	}
	if s, ok := wreq.ToolChoice.(string); ok {
		b.ToolChoice = s
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = emptySchema
		}
		if !json.Valid(params) {
			return nil, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
		}
		b.Tools = append(b.Tools, bodyTool{Type: "function", Function: bodyFunctionDef{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if cache == nil {
		cache = new(msgCache)
	}
	msgs, err := cache.messages(req.Messages)
	if err != nil {
		return nil, err
	}
	if o.reasoningBack {
		if err := reasoningBack(req.Messages, msgs); err != nil {
			return nil, err
		}
	}
	// The request is encoded without its messages ("messages":null) and
	// they are put in its place, joined as encoding/json joins an array's
	// elements. The marker cannot occur earlier: the model's name, the
	// only field before it, is a JSON string, whose quotes are escaped.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return nil, err
	}
	frame := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	at := bytes.Index(frame, messagesNull)
	if at < 0 {
		return nil, fmt.Errorf("encode request: no messages field")
	}
	cut := at + len(messagesNull) - len("null")
	head := append(frame[:cut:cut], '[')
	tail := append([]byte{']'}, frame[at+len(messagesNull):]...)
	return newBody(head, msgs, tail), nil
}

// Body is the JSON body of a chat completion request, kept as the pieces
// it is made of — the request around its messages, and each message's
// encoding, shared with the client's cache — and never joined: sending a
// turn's body does not copy the context into one buffer. A Body is not
// changed once built; it is safe for concurrent use.
type Body struct {
	head, tail []byte   // up to and with the messages' '[', from their ']'
	msgs       [][]byte // each message's JSON
	size       int
}

func newBody(head []byte, msgs [][]byte, tail []byte) *Body {
	n := len(head) + len(tail) + max(len(msgs)-1, 0)
	for _, m := range msgs {
		n += len(m)
	}
	return &Body{head: head, tail: tail, msgs: msgs, size: n}
}

// Len returns the body's length in bytes (the request's Content-Length).
func (b *Body) Len() int { return b.size }

// Reader returns a reader of the body from its start; each call returns a
// new one. The reader is also an io.WriterTo, which writes the pieces as
// they are.
func (b *Body) Reader() io.Reader { return &bodyReader{b: b} }

// Bytes returns the body joined into one slice, a copy.
func (b *Body) Bytes() []byte {
	out := make([]byte, 0, b.size)
	for k := range b.parts() {
		out = append(out, b.part(k)...)
	}
	return out
}

// into makes b the body of req, with its length and a way to read it
// again (GetBody) for the transport's own retries and redirects.
func (b *Body) into(req *http.Request) {
	req.Body = io.NopCloser(b.Reader())
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(b.Reader()), nil }
	req.ContentLength = int64(b.size)
}

// parts returns the number of pieces: the head, the messages with a comma
// between each two, the tail.
func (b *Body) parts() int { return 2 + max(2*len(b.msgs)-1, 0) }

var comma = []byte{','}

// part returns piece k of parts().
func (b *Body) part(k int) []byte {
	switch {
	case k == 0:
		return b.head
	case k == b.parts()-1:
		return b.tail
	case k%2 == 0:
		return comma
	}
	return b.msgs[k/2]
}

// bodyReader reads a Body piece by piece.
type bodyReader struct {
	b   *Body
	k   int // the piece being read
	off int // within it
}

func (r *bodyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.k < r.b.parts() {
		c := copy(p[n:], r.b.part(r.k)[r.off:])
		n += c
		r.off += c
		if r.off == len(r.b.part(r.k)) {
			r.k, r.off = r.k+1, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo writes what is left of the body to w, each piece in one Write.
func (r *bodyReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for ; r.k < r.b.parts(); r.k, r.off = r.k+1, 0 {
		n, err := w.Write(r.b.part(r.k)[r.off:])
		total += int64(n)
		if err != nil {
			r.off += n
			return total, err
		}
	}
	return total, nil
}

// reasoningBack encodes again, with their reasoning, the assistant
// messages of the current turn (since the last user message) that called
// tools: DeepSeek's thinking mode wants that reasoning back within the
// turn, and not after. Their encodings without it stay in the cache.
func reasoningBack(msgs []Message, out [][]byte) error {
	turn := 0 // the current turn's first message
	for i, m := range msgs {
		if m.Role == RoleUser {
			turn = i + 1
		}
	}
	for i := turn; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role != RoleAssistant || len(m.ToolCalls) == 0 || m.Reasoning == "" {
			continue
		}
		bm, err := bodyMessageOf(m)
		if err != nil {
			return messageError(i, err)
		}
		bm.ReasoningContent = m.Reasoning
		js, err := marshalMessage(bm)
		if err != nil {
			return messageError(i, err)
		}
		out[i] = js
	}
	return nil
}

// messagesNull is the messages field of a request encoded without them.
var messagesNull = []byte(`,"messages":null`)

// messageError names the message that could not be encoded.
func messageError(i int, err error) error { return fmt.Errorf("message %d: %w", i, err) }

func bodyMessageOf(m Message) (bodyMessage, error) {
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
	default:
		return bodyMessage{}, fmt.Errorf("unknown role %q", m.Role)
	}
	bm := bodyMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
	switch {
	case len(m.Parts) > 0:
		parts := make([]bodyPart, 0, len(m.Parts)+1)
		if m.Content != "" {
			parts = append(parts, bodyPart{Type: "text", Text: m.Content})
		}
		for i, p := range m.Parts {
			switch p.Type {
			case PartText:
				parts = append(parts, bodyPart{Type: "text", Text: p.Text})
			case PartImage:
				if len(p.ImageData) == 0 {
					return bm, fmt.Errorf("part %d: empty image", i)
				}
				parts = append(parts, bodyPart{Type: "image_url", ImageURL: &bodyImageURL{URL: dataURL(p.ImageMIME, p.ImageData)}})
			default:
				return bm, fmt.Errorf("part %d: unknown type %q", i, p.Type)
			}
		}
		bm.Content = parts
	case m.Content != "" || m.Role == RoleTool || len(m.ToolCalls) == 0:
		// A tool result is always sent with its content, even empty: some
		// servers refuse a tool message without one.
		bm.Content = m.Content
	}
	for _, tc := range m.ToolCalls {
		args := tc.Arguments
		if args == "" {
			args = "{}"
		}
		bm.ToolCalls = append(bm.ToolCalls, bodyToolCall{ID: tc.ID, Type: "function", Function: bodyFunction{Name: tc.Name, Arguments: args}})
	}
	return bm, nil
}
