// Package llm is Baton's boundary to an OpenAI-compatible chat completions
// endpoint (OpenAI, Azure, vLLM, Ollama, llama.cpp server, OpenRouter).
//
// It is the only package in Baton that imports
// github.com/sashabaranov/go-openai; everything above it speaks in the types
// declared here (Message, ToolDef, Request, Response). A Client sends one
// completion per Complete call — streamed when Config.Stream is set
// (stream.go: Baton's own server-sent event decoder), else as one JSON
// reply — shaped by the provider's Profile (providers.go), and takes care
// of what every caller would otherwise repeat: retries with backoff on 429, 5xx, timeouts
// and broken connections (honouring Retry-After), provider rate-limit
// messages returned as text, tool calls written into the text instead of
// tool_calls, and token usage.
//
// Failures a person can fix are never retried and come back as an *Error
// that says what to change in one sentence: an empty llm.api_key where the
// endpoint needs one, a refused key, a model the endpoint does not have
// (with the models it has), nothing answering at llm.base_url, an HTML page
// where the API should be. The API key, and any password in the base URL,
// never appear in errors or logs: they are redacted by value (redact.go),
// so that a short key such as Ollama's "ollama" does not mangle a host
// named ollama.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/baton-bot/baton/core"
)

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Kinds of a Part.
const (
	PartText  = "text"
	PartImage = "image"
)

// Tool choices of a Request.
const (
	ToolChoiceAuto = "auto"
	ToolChoiceNone = "none"
	// ToolChoiceRequired asks for a tool call, whichever tool; not every
	// OpenAI-compatible server knows it.
	ToolChoiceRequired = "required"
)

// Message is one entry of a conversation with the model.
type Message struct {
	// Role is one of RoleSystem, RoleUser, RoleAssistant, RoleTool.
	Role string
	// Content is the message text. When Parts is not empty, a non-empty
	// Content is sent as a text part before them.
	Content string
	// Parts carries mixed text and images (images belong in user messages:
	// most providers refuse them elsewhere).
	Parts []Part
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID names the call a RoleTool message answers.
	ToolCallID string
	// Name is the optional participant or tool name.
	Name string
	// Reasoning is a reasoning model's thinking that came with an
	// assistant answer (reasoning_content, reasoning): never part of
	// Content, and not sent back in later requests.
	Reasoning string
}

// Part is one piece of a multi-part message: text, or an image sent to the
// model as a data: URL.
type Part struct {
	// Type is PartText or PartImage.
	Type string
	// Text is the text of a PartText part.
	Text string
	// ImageMIME is the media type of a PartImage part, e.g. "image/png".
	ImageMIME string
	// ImageData is the raw (not base64) image of a PartImage part.
	ImageData []byte
}

// ToolCall is one function call made by the model.
type ToolCall struct {
	// ID pairs the call with the RoleTool message that answers it.
	ID string
	// Name is the tool's name.
	Name string
	// Arguments is the call's arguments as the model wrote them: normally a
	// JSON object, but callers must be ready for malformed JSON.
	Arguments string
}

// ToolDef offers one function tool to the model.
type ToolDef struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments; empty means an object
	// with no properties.
	Parameters json.RawMessage
}

// Request is one chat completion request.
type Request struct {
	// Model overrides Config.Model when not empty.
	Model    string
	Messages []Message
	Tools    []ToolDef
	// MaxTokens caps the completion's length; 0 leaves it to the server.
	MaxTokens int
	// ToolChoice is ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired or
	// "" (server default).
	ToolChoice string

	// OnText, when set and the Client streams (Config.Stream), is called
	// with each piece of the answer's text as it arrives, in order, on the
	// goroutine that called Complete; it must not block long (hand the
	// delta on, do not send it anywhere slow). Reasoning text is not
	// passed. Pieces already passed can turn out to be a tool call written
	// as text; Response.Message is what counts.
	OnText func(delta string)
	// OnRestart, when set, is called before an attempt that follows one
	// which already passed text to OnText (a stream cut midway, retried as
	// a whole request): the text passed so far is void and the answer's
	// text starts again from its first delta.
	OnRestart func()
}

// Response is the model's answer to a Request.
type Response struct {
	// Message is the assistant's message. Tool calls the model wrote into
	// its text are moved to Message.ToolCalls (see ExtractToolCalls).
	Message Message
	// FinishReason is the server's reason, e.g. "stop", "tool_calls", "length".
	FinishReason string
	Usage        Usage

	// TextCalls is how many of Message.ToolCalls were recovered from the
	// text (ExtractToolCalls); 0 when the server sent them as tool_calls.
	TextCalls int
	// RepairedCalls is how many calls had arguments that were not valid
	// JSON and were repaired (RepairJSON).
	RepairedCalls int
	// UnreadCall reports a reply without calls whose text looks like an
	// attempt at one that could not be read, or that names a tool not
	// offered (LooksLikeToolCall).
	UnreadCall bool
}

// Usage is the token count of one completion as the server reported it.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens is the part of PromptTokens served from the provider's
	// prompt cache (prompt_tokens_details.cached_tokens).
	CachedTokens int
	// ReasoningTokens is the part of CompletionTokens a reasoning model
	// spent thinking (completion_tokens_details.reasoning_tokens).
	ReasoningTokens int
	// Reported is false when the server sent no usage at all; the counts
	// are then zero and mean nothing.
	Reported bool
}

// Config configures a Client.
type Config struct {
	// BaseURL is the API root including its version, e.g.
	// "https://api.openai.com/v1" or "http://localhost:11434/v1".
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none. It is never
	// logged nor included in errors.
	APIKey string
	// Model is used when a Request names none.
	Model string
	// Timeout bounds one attempt (not the retries); 0 means 2 minutes.
	Timeout time.Duration
	// MaxRetries is how many times a failed attempt is retried; 0 means
	// no retries, a negative value is treated as 0.
	MaxRetries int
	// HTTPClient sends the requests; nil means a plain *http.Client.
	HTTPClient *http.Client
	// Logger receives retries and failures; nil discards them.
	Logger *slog.Logger
	// NumCtx, when positive and the provider is Ollama (its profile), is
	// sent with every request as options.num_ctx: the context Ollama gives
	// the model, which it otherwise keeps at its own default (a few
	// thousand tokens) and silently cuts longer prompts to.
	NumCtx int
	// Stream asks for the answer as a server-sent event stream (stream:
	// true, with usage in its last chunk); Request.OnText then sees the
	// text as it arrives. A stream that stops before its end is retried as
	// a whole request. Servers that answer a stream request with a plain
	// JSON body are understood too.
	Stream bool
	// Provider is llm.provider: one of ProviderNames, "" meaning auto
	// (from the base URL). Its Profile decides the headers, the token
	// limit's name, the rate-limit headers read and what is not sent.
	Provider string
	// ReasoningEffort, when not empty, is sent as reasoning_effort
	// (minimal, low, medium, high: reasoning models only).
	ReasoningEffort string
	// Sleep waits between attempts; nil waits on a timer. It must return
	// ctx.Err() when ctx ends first. Tests inject it to never sleep.
	Sleep func(ctx context.Context, d time.Duration) error
}

const (
	defaultTimeout = 2 * time.Minute
	// backoffBase and backoffMax shape the exponential backoff used when
	// the server gives no Retry-After.
	backoffBase = time.Second
	backoffMax  = 30 * time.Second
	// retryAfterMax caps a server's Retry-After so that one answer cannot
	// park a worker for hours.
	retryAfterMax = 5 * time.Minute
)

// Client sends chat completions. It is safe for concurrent use.
type Client struct {
	api        *openai.Client
	model      string
	timeout    time.Duration
	maxRetries int
	log        *slog.Logger
	sleep      func(ctx context.Context, d time.Duration) error
	redact     func(string) string
	url        string // the base URL as errors show it (shownURL)
	hc         *http.Client
	baseURL    string // Config.BaseURL without a trailing slash
	apiKey     string // sent as the bearer token; never logged
	stream     bool
	profile    Profile
	effort     string
	mu         sync.Mutex
	params     map[string]string // guarded by mu: the token-limit parameter learnt per model
	noKey      bool              // Config.APIKey is empty
	keyMissing bool              // noKey, and the endpoint needs a key (NeedsKey)
	numCtx     int               // Config.NumCtx, to Ollama only
	encoded    msgCache          // the JSON of messages already sent (msgcache.go)
}

// New returns a Client for cfg. It fails when BaseURL is not an http(s) URL.
// An empty APIKey is accepted, as local servers need none; where the
// endpoint is known to need one (NeedsKey), Complete fails with KindNoKey
// before sending anything.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm: base URL %q is not an http(s) URL", newRedactor(cfg.APIKey).redact(cfg.BaseURL))
	}
	profile, ok := ProfileOf(cfg.Provider, cfg.BaseURL)
	if !ok {
		return nil, fmt.Errorf("llm: provider %q is not one of %s", cfg.Provider, strings.Join(ProviderNames(), ", "))
	}
	password, _ := u.User.Password()
	redact := newRedactor(cfg.APIKey, password).redact
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	oc.HTTPClient = recorder{hc: hc, profile: profile, apiKey: cfg.APIKey}
	c := &Client{
		api:        openai.NewClientWithConfig(oc),
		model:      cfg.Model,
		timeout:    cfg.Timeout,
		maxRetries: max(cfg.MaxRetries, 0),
		log:        cfg.Logger,
		sleep:      cfg.Sleep,
		redact:     redact,
		url:        redact(shownURL(u)),
		numCtx:     max(cfg.NumCtx, 0),
		hc:         hc,
		baseURL:    strings.TrimSuffix(cfg.BaseURL, "/"),
		apiKey:     cfg.APIKey,
		stream:     cfg.Stream,
		profile:    profile,
		effort:     cfg.ReasoningEffort,
		noKey:      cfg.APIKey == "",
		keyMissing: cfg.APIKey == "" && NeedsKey(cfg.BaseURL),
	}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.sleep == nil {
		c.sleep = core.Sleep
	}
	return c, nil
}

// Profile returns the provider profile the client speaks by (llm.provider,
// or the one auto found from the base URL).
func (c *Client) Profile() Profile { return c.profile }

// ErrUnavailable is wrapped by the error Complete returns when the model kept
// failing with retryable errors until the retry limit (an *Error of
// KindUnavailable). Its message is a plain sentence fit to show a person,
// e.g. "the language model kept failing: 429 Too Many Requests after 5
// retries".
var ErrUnavailable = errors.New("the language model kept failing")

// StatusError is an HTTP error answered by the server. Message is the
// server's explanation with the API key removed.
type StatusError struct {
	StatusCode int
	// Code is the provider's error code when it sent one, e.g.
	// "context_length_exceeded".
	Code    string
	Message string
}

func (e *StatusError) Error() string {
	s := statusText(e.StatusCode)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Retryable reports whether the status is worth another attempt.
func (e *StatusError) Retryable() bool {
	return e.StatusCode == http.StatusTooManyRequests ||
		e.StatusCode == http.StatusRequestTimeout ||
		e.StatusCode >= 500
}

// IsContextOverflow reports whether err is the server refusing a request
// because it does not fit the model's context window: OpenAI's
// context_length_exceeded, or a 400/413 whose message says so (vLLM,
// llama.cpp and Ollama word it their own way).
func IsContextOverflow(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	if se.Code == "context_length_exceeded" {
		return true
	}
	if se.StatusCode != http.StatusBadRequest && se.StatusCode != http.StatusRequestEntityTooLarge {
		return false
	}
	msg := strings.ToLower(se.Message)
	for _, s := range []string{"context length", "context window", "maximum context", "too many tokens", "prompt is too long", "exceeds the context"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	for _, s := range contextPhrases {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("%d %s", code, t)
	}
	return fmt.Sprintf("HTTP %d", code)
}
