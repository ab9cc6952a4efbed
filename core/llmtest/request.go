package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Request is one chat completion request as the server received it.
type Request struct {
	Model    string
	Messages []Message
	Tools    []Tool
	// ToolChoice is the tool_choice value when it was a string.
	ToolChoice string
	// MaxTokens is max_tokens, or max_completion_tokens when that was sent.
	MaxTokens int
	// MaxTokensParam names the limit's parameter as sent: "max_tokens",
	// "max_completion_tokens" or "" (none).
	MaxTokensParam string
	Stream         bool
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	// ReasoningEffort is reasoning_effort, when sent.
	ReasoningEffort string
	// Raw is the request body exactly as sent.
	Raw []byte
	// Header and Query are the request's headers and URL query.
	Header http.Header
	Query  url.Values
}

// Message is one message of a recorded request.
type Message struct {
	Role string
	// Content is the text when content was a string.
	Content string
	// Parts is the content when it was an array of parts.
	Parts      []Part
	ToolCalls  []ToolCall
	ToolCallID string
	Name       string
	// ReasoningContent is an assistant message's reasoning_content.
	ReasoningContent string
}

// Part is one content part: Type "text" with Text, or "image_url" with
// ImageURL (e.g. a data: URL).
type Part struct {
	Type     string
	Text     string
	ImageURL string
}

// Tool is one function tool offered to the model.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema as sent, compacted.
	Parameters json.RawMessage
}

// Text joins the text of a message: Content, or its text parts.
func (m Message) Text() string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	var b bytes.Buffer
	for _, p := range m.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// ToolNames lists the names of the tools offered.
func (r Request) ToolNames() []string {
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return names
}

type (
	wireRequest struct {
		Model               string          `json:"model"`
		Messages            []wireMessage   `json:"messages"`
		Tools               []wireTool      `json:"tools"`
		ToolChoice          json.RawMessage `json:"tool_choice"`
		MaxTokens           int             `json:"max_tokens"`
		MaxCompletionTokens int             `json:"max_completion_tokens"`
		Stream              bool            `json:"stream"`
		StreamOptions       *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		ReasoningEffort string `json:"reasoning_effort"`
	}
	wireMessage struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []wireToolCall  `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
		Name       string          `json:"name"`
		Reasoning  string          `json:"reasoning_content"`
	}
	wirePart struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	wireTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
)

func decodeRequest(body []byte) (Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return Request{}, err
	}
	if w.Model == "" {
		return Request{}, fmt.Errorf("no model")
	}
	r := Request{Model: w.Model, MaxTokens: w.MaxTokens, Stream: w.Stream, Raw: body, ReasoningEffort: w.ReasoningEffort}
	if w.StreamOptions != nil {
		r.IncludeUsage = w.StreamOptions.IncludeUsage
	}
	if w.MaxTokens > 0 {
		r.MaxTokensParam = "max_tokens"
	}
	if w.MaxCompletionTokens > 0 {
		r.MaxTokens, r.MaxTokensParam = w.MaxCompletionTokens, "max_completion_tokens"
	}
	if len(w.ToolChoice) > 0 {
		_ = json.Unmarshal(w.ToolChoice, &r.ToolChoice) // an object choice stays ""
	}
	for i, wm := range w.Messages {
		m := Message{Role: wm.Role, ToolCallID: wm.ToolCallID, Name: wm.Name, ReasoningContent: wm.Reasoning}
		content := bytes.TrimSpace(wm.Content)
		switch {
		case len(content) == 0 || string(content) == "null":
		case content[0] == '"':
			if err := json.Unmarshal(content, &m.Content); err != nil {
				return Request{}, fmt.Errorf("message %d: %w", i, err)
			}
		case content[0] == '[':
			var parts []wirePart
			if err := json.Unmarshal(content, &parts); err != nil {
				return Request{}, fmt.Errorf("message %d: %w", i, err)
			}
			for _, p := range parts {
				part := Part{Type: p.Type, Text: p.Text}
				if p.ImageURL != nil {
					part.ImageURL = p.ImageURL.URL
				}
				m.Parts = append(m.Parts, part)
			}
		default:
			return Request{}, fmt.Errorf("message %d: content is neither text nor parts", i)
		}
		for _, tc := range wm.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		r.Messages = append(r.Messages, m)
	}
	for _, wt := range w.Tools {
		t := Tool{Name: wt.Function.Name, Description: wt.Function.Description}
		if len(wt.Function.Parameters) > 0 {
			var b bytes.Buffer
			if err := json.Compact(&b, wt.Function.Parameters); err != nil {
				return Request{}, fmt.Errorf("tool %q: %w", t.Name, err)
			}
			t.Parameters = b.Bytes()
		}
		r.Tools = append(r.Tools, t)
	}
	return r, nil
}
