package llm

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// emptySchema is sent for a tool that declares no parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// wireRequest returns go-openai's request for req without its messages
// and tools (see body.go): the model, the tool choice and the token limit,
// which go-openai validates.
func (c *Client) wireRequest(req Request) (openai.ChatCompletionRequest, error) {
	w := openai.ChatCompletionRequest{Model: req.Model}
	if w.Model == "" {
		w.Model = c.model
	}
	if w.Model == "" {
		return w, errors.New("no model configured")
	}
	if len(req.Messages) == 0 {
		return w, errors.New("no messages to send")
	}
	switch req.ToolChoice {
	case "":
	case ToolChoiceAuto, ToolChoiceNone:
		w.ToolChoice = req.ToolChoice
	case ToolChoiceRequired:
		w.ToolChoice = req.ToolChoice
		if c.profile.NoRequired {
			w.ToolChoice = ToolChoiceAuto
		}
	default:
		return w, fmt.Errorf("tool choice %q is not %q, %q or %q", req.ToolChoice, ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired)
	}
	if req.MaxTokens > 0 {
		// Reasoning models refuse max_tokens and want max_completion_tokens;
		// older OpenAI-compatible servers know only max_tokens. go-openai's
		// validator knows which model is which.
		// The profile names the models known up front; a 400 naming the
		// parameter teaches the client (c.param).
		w.MaxTokens = req.MaxTokens
		param := c.param(w.Model)
		if param == "" && (c.profile.completionTokens(w.Model) ||
			errors.Is(openai.NewReasoningValidator().Validate(w), openai.ErrReasoningModelMaxTokensDeprecated)) {
			param = paramCompletionTokens
		}
		if param == paramCompletionTokens {
			w.MaxTokens, w.MaxCompletionTokens = 0, req.MaxTokens
		}
	}
	return w, nil
}

// The names of the completion's token limit.
const (
	paramMaxTokens        = "max_tokens"
	paramCompletionTokens = "max_completion_tokens"
)

// param returns the token-limit parameter learnt for model, "" if none.
func (c *Client) param(model string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.params[model]
}

// learnParam reads a 400 that refuses one token-limit parameter and names
// the other, and remembers for model the one to send; it reports whether
// the request is worth sending again with it.
func (c *Client) learnParam(model string, sent openai.ChatCompletionRequest, err error) bool {
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest {
		return false
	}
	msg := strings.ToLower(se.Message)
	if !strings.Contains(msg, paramMaxTokens) {
		return false
	}
	var want string
	switch {
	case sent.MaxTokens > 0 && strings.Contains(msg, paramCompletionTokens):
		want = paramCompletionTokens // "Use 'max_completion_tokens' instead."
	case sent.MaxCompletionTokens > 0 && strings.Contains(msg, paramCompletionTokens) &&
		!strings.Contains(msg, "use '"+paramCompletionTokens) && !strings.Contains(msg, paramCompletionTokens+"' instead") &&
		(strings.Contains(msg, "unrecognized") || strings.Contains(msg, "unknown") || strings.Contains(msg, "not supported")):
		want = paramMaxTokens // a server that knows only max_tokens
	default:
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.params == nil {
		c.params = map[string]string{}
	}
	if c.params[model] == want {
		return false
	}
	c.params[model] = want
	return true
}

// bodyOptions are the client's choices for every body.
func (c *Client) bodyOptions() bodyOptions {
	o := bodyOptions{stream: c.stream, reasoningBack: c.profile.ReasoningBack, effort: c.effort}
	if c.profile.Name == "ollama" {
		o.numCtx = c.numCtx
	}
	return o
}

// dataURL encodes an image as a data: URL, sniffing the type when mime is
// empty.
func dataURL(mime string, data []byte) string {
	if mime == "" {
		mime = http.DetectContentType(data)
	}
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// fromWire translates go-openai's response (with at least one choice).
func fromWire(out openai.ChatCompletionResponse, usageReported bool) Response {
	ch := out.Choices[0]
	msg := Message{Role: RoleAssistant, Content: ch.Message.Content, Reasoning: ch.Message.ReasoningContent}
	for i, tc := range ch.Message.ToolCalls {
		id := tc.ID
		if id == "" {
			id = callID(tc.Function.Name+tc.Function.Arguments+ch.Message.Content, i)
		}
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: id, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if fc := ch.Message.FunctionCall; fc != nil && fc.Name != "" && len(msg.ToolCalls) == 0 {
		// The legacy function_call field some servers still fill.
		msg.ToolCalls = []ToolCall{{ID: callID(fc.Name+fc.Arguments, 0), Name: fc.Name, Arguments: fc.Arguments}}
	}
	r := Response{Message: msg, FinishReason: string(ch.FinishReason)}
	if usageReported {
		r.Usage = Usage{
			PromptTokens:     out.Usage.PromptTokens,
			CompletionTokens: out.Usage.CompletionTokens,
			Reported:         true,
		}
		if d := out.Usage.PromptTokensDetails; d != nil {
			r.Usage.CachedTokens = d.CachedTokens
		}
		if d := out.Usage.CompletionTokensDetails; d != nil {
			r.Usage.ReasoningTokens = d.ReasoningTokens
		}
	}
	return r
}

// callID makes an id for a call the server gave none: derived from the
// call's text so that transcripts stay reproducible, and distinct across
// turns because the text differs.
func callID(seed string, i int) string {
	sum := sha256.Sum256([]byte(seed))
	return fmt.Sprintf("call_%s_%d", hex.EncodeToString(sum[:6]), i)
}

// toolNames returns a membership test over the offered tools, nil when
// none were offered.
func toolNames(tools []ToolDef) func(string) bool {
	if len(tools) == 0 {
		return nil
	}
	set := make(map[string]bool, len(tools))
	for _, t := range tools {
		set[t.Name] = true
	}
	return func(name string) bool { return set[name] }
}

// Encode returns the JSON body Complete would send for req (the
// translation and the encoding, without the network), built as Complete
// builds it, from the client's cache of encoded messages. Benchmarks of
// the engine's per-turn work use it.
func (c *Client) Encode(req Request) (*Body, error) {
	w, err := c.wireRequest(req)
	if err != nil {
		return nil, err
	}
	return encodeBody(&c.encoded, req, w, c.bodyOptions())
}
