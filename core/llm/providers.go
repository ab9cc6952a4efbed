package llm

import (
	"crypto/sha256"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Provider names, the values of llm.provider; ProviderAuto picks one from
// the base URL (DetectProvider).
const (
	ProviderAuto       = "auto"
	ProviderOpenAI     = "openai"
	ProviderAzure      = "azure"
	ProviderOpenRouter = "openrouter"
	ProviderOllama     = "ollama"
	ProviderVLLM       = "vllm"
	ProviderLlamaCpp   = "llamacpp"
	ProviderGroq       = "groq"
	ProviderDeepSeek   = "deepseek"
	ProviderMistral    = "mistral"
	ProviderGemini     = "gemini"
	ProviderAnthropic  = "anthropic"
)

// Profile is what Baton knows of one provider's OpenAI-compatible
// endpoint: how to address it and what it does not take. Profiles is the
// one table of them; the README's provider table is generated from it.
type Profile struct {
	// Name is the llm.provider value.
	Name string
	// Title is the provider's name for people.
	Title string
	// Hosts are the host names (or their suffixes, from a dot) that
	// llm.provider: auto takes for this provider.
	Hosts []string
	// Port is the local server's usual port auto takes it by, 0 if none.
	Port string
	// ListedBy says, for people, what in the endpoint's model list tells
	// auto it is this provider (ProviderFromModels decides); "" when
	// nothing does.
	ListedBy string
	// CompletionTokensModels are model name prefixes that refuse
	// max_tokens and take max_completion_tokens (reasoning models). A 400
	// naming the parameter teaches Baton the same for any other model.
	CompletionTokensModels []string
	// KeyHeader is the header the API key goes in: "" for
	// "Authorization: Bearer <key>", else the header's name (Azure's
	// api-key).
	KeyHeader string
	// APIVersion, when not empty, is sent as the api-version query
	// parameter unless the base URL carries one (Azure).
	APIVersion string
	// Headers are sent with every request (OpenRouter's attribution).
	Headers map[string]string
	// RateLimitHeaders are the headers that say how long to wait after a
	// 429, in the order they are read.
	RateLimitHeaders []string
	// ContextErrors are the provider's words, in lower case, for a
	// request larger than the model's context window.
	ContextErrors []string
	// ReasoningField is where the provider streams reasoning text:
	// reasoning_content or reasoning.
	ReasoningField string
	// ReasoningBack: the reasoning of an assistant message that called
	// tools must be sent back with it until the turn ends (DeepSeek's
	// thinking mode).
	ReasoningBack bool
	// Not supported, sent as something else or not at all: NoParallel
	// (parallel_tool_calls; Baton never sends it there), NoRequired
	// (tool_choice "required": sent as "auto"), NoImages (image parts),
	// NoStreamUsage (no usage in streams: counts are estimated).
	NoParallel, NoRequired, NoImages, NoStreamUsage bool
	// ShortCallIDs: tool call ids must be nine letters and digits
	// (Mistral refuses others when they come back); ids Baton makes, or
	// that a server sent otherwise, are rewritten so.
	ShortCallIDs bool
	// Note is the quirk worth knowing, for the README.
	Note string
}

// OpenAI's documented rate-limit headers (x-ratelimit-reset-* are
// durations such as "1s" or "6m0s").
var openaiRateHeaders = []string{"retry-after-ms", "retry-after", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"}

// openaiContext is OpenAI's wording of a context overflow (its code is
// context_length_exceeded); many servers copy it.
const openaiContext = "maximum context length"

// Profiles is the table of providers, llm.provider's values but auto.
var Profiles = []Profile{
	{Name: ProviderOpenAI, Title: "OpenAI", Hosts: []string{"api.openai.com"},
		CompletionTokensModels: []string{"o1", "o3", "o4", "gpt-5"},
		RateLimitHeaders:       openaiRateHeaders, ContextErrors: []string{openaiContext},
		Note: "reasoning models (o-series, gpt-5) take max_completion_tokens and reasoning_effort"},
	{Name: ProviderAzure, Title: "Azure OpenAI", Hosts: []string{".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com"},
		CompletionTokensModels: []string{"o1", "o3", "o4", "gpt-5"},
		KeyHeader:              "api-key", APIVersion: "2024-10-21",
		RateLimitHeaders: openaiRateHeaders, ContextErrors: []string{openaiContext},
		Note: "base_url is the deployment's URL (…/openai/deployments/NAME); the key goes in api-key, api-version is added unless the URL has one"},
	{Name: ProviderOpenRouter, Title: "OpenRouter", ListedBy: "`pricing` and `architecture`", Hosts: []string{"openrouter.ai"},
		CompletionTokensModels: []string{"openai/o1", "openai/o3", "openai/o4", "openai/gpt-5"},
		Headers:                map[string]string{"HTTP-Referer": "https://github.com/baton-bot/baton", "X-Title": "Baton"},
		RateLimitHeaders:       []string{"retry-after"}, ContextErrors: []string{openaiContext, "context length"},
		ReasoningField: "reasoning",
		Note:           "a provider's failure can come as an error object inside a 200 (or a stream event), retried like the status it names; streams carry : OPENROUTER PROCESSING comments"},
	{Name: ProviderOllama, Title: "Ollama", ListedBy: "`owned_by: library`", Port: "11434",
		ContextErrors: []string{"context length"}, NoParallel: true, NoRequired: true, NoStreamUsage: true,
		Note: "prompts longer than num_ctx are cut silently, not refused"},
	{Name: ProviderVLLM, Title: "vLLM", ListedBy: "`owned_by: vllm`", Port: "8000",
		ContextErrors: []string{openaiContext, "is longer than the maximum model length"}, ReasoningField: "reasoning_content",
		Note: "tool calls need --enable-auto-tool-choice and a --tool-call-parser; without one they come as text"},
	{Name: ProviderLlamaCpp, Title: "llama.cpp server", ListedBy: "`owned_by: llamacpp`", Port: "8080",
		ContextErrors: []string{"exceeds the available context size", "context size"}, NoParallel: true, NoImages: true,
		ReasoningField: "reasoning_content",
		Note:           "tool calls need --jinja; images only with a multimodal projector (--mmproj)"},
	{Name: ProviderGroq, Title: "Groq", ListedBy: "`active` and `context_window`", Hosts: []string{"api.groq.com"},
		RateLimitHeaders: []string{"retry-after", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"},
		ContextErrors:    []string{"context_length_exceeded", "reduce the length of the messages"}, NoImages: true,
		ReasoningField: "reasoning",
		Note:           "images only on its vision models"},
	{Name: ProviderDeepSeek, Title: "DeepSeek", ListedBy: "`owned_by: deepseek`", Hosts: []string{"api.deepseek.com"},
		ContextErrors: []string{openaiContext}, ReasoningField: "reasoning_content", ReasoningBack: true,
		NoParallel: true, NoImages: true,
		Note: "thinking mode: reasoning_content goes back with the tool-calling turn it belongs to, and never otherwise"},
	{Name: ProviderMistral, Title: "Mistral", ListedBy: "`capabilities.completion_chat`", Hosts: []string{"api.mistral.ai"},
		RateLimitHeaders: []string{"retry-after"},
		ContextErrors:    []string{"too large for model with", "maximum context length"},
		ShortCallIDs:     true,
		Note:             "tool call ids are nine letters and digits; tool_choice any is its required"},
	{Name: ProviderGemini, Title: "Gemini (OpenAI compatibility)", ListedBy: "ids `models/…`", Hosts: []string{"generativelanguage.googleapis.com"},
		RateLimitHeaders: []string{"retry-after"},
		ContextErrors:    []string{"exceeds the maximum number of tokens allowed", "input token count"}, NoParallel: true,
		ReasoningField: "reasoning_content",
		Note:           "errors can come as a JSON array of error objects; base_url …/v1beta/openai"},
	{Name: ProviderAnthropic, Title: "Anthropic (OpenAI compatibility)", ListedBy: "`type: model` with `display_name`", Hosts: []string{"api.anthropic.com"},
		RateLimitHeaders: []string{"retry-after"},
		ContextErrors:    []string{"prompt is too long"},
		Note:             "base_url https://api.anthropic.com/v1/; extended thinking is not returned through this layer"},
}

// genericProfile is used for an endpoint auto does not recognise: nothing
// left out, OpenAI's headers and words.
var genericProfile = Profile{Name: "openai-compatible", Title: "OpenAI-compatible",
	RateLimitHeaders: openaiRateHeaders, ContextErrors: []string{openaiContext}}

// ProfileOf returns the profile named name; auto (or "") detects it from
// baseURL, and an endpoint it does not recognise gets a generic profile
// that leaves nothing out. ok is false for a name that is no provider.
func ProfileOf(name, baseURL string) (Profile, bool) {
	if name == "" || name == ProviderAuto {
		name = DetectProvider(baseURL)
		if name == "" {
			return genericProfile, true
		}
	}
	for _, p := range Profiles {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// ProviderNames lists llm.provider's values, auto first.
func ProviderNames() []string {
	names := []string{ProviderAuto}
	for _, p := range Profiles {
		names = append(names, p.Name)
	}
	return names
}

// DetectProvider names the provider of baseURL by its host (or, for a
// local server, by its usual port), "" when it is none Baton knows.
func DetectProvider(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return ""
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	for _, p := range Profiles {
		for _, h := range p.Hosts {
			if host == h || (strings.HasPrefix(h, ".") && strings.HasSuffix(host, h)) {
				return p.Name
			}
		}
	}
	port := u.Port()
	if port == "" || !local(host) {
		return ""
	}
	for _, p := range Profiles {
		if p.Port == port {
			return p.Name
		}
	}
	return ""
}

// local reports whether host is this machine or a private address, where
// a local server's port says which server it is.
func local(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".local") || !strings.Contains(host, ".") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate())
}

// completionTokens reports whether model is known to take
// max_completion_tokens rather than max_tokens.
func (p Profile) completionTokens(model string) bool {
	m := strings.ToLower(model)
	for _, pre := range p.CompletionTokensModels {
		if strings.HasPrefix(m, pre) {
			return true
		}
	}
	return false
}

// decorate puts the profile's authentication, query and headers on a
// request to the endpoint: the key in KeyHeader (not as a bearer token),
// api-version, and Headers.
func (p Profile) decorate(req *http.Request, apiKey string) {
	if p.KeyHeader != "" {
		req.Header.Del("Authorization")
		if apiKey != "" {
			req.Header.Set(p.KeyHeader, apiKey)
		}
	}
	if p.APIVersion != "" {
		q := req.URL.Query()
		if q.Get("api-version") == "" && !strings.Contains(req.URL.Path, "/openai/v1/") {
			q.Set("api-version", p.APIVersion)
			req.URL.RawQuery = q.Encode()
		}
	}
	for k, v := range p.Headers {
		if req.Header.Get(k) == "" {
			req.Header.Set(k, v)
		}
	}
}

// contextPhrases are every profile's context-overflow words: a server's
// wording says what it is whatever provider was configured.
var contextPhrases = func() []string {
	var out []string
	for _, p := range append(Profiles, genericProfile) {
		out = append(out, p.ContextErrors...)
	}
	return out
}()

// shortID is a tool call id of nine letters and digits derived from id.
func shortID(id string) string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	if len(id) == 9 && strings.Trim(id, alnum) == "" {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	b := make([]byte, 9)
	for i := range b {
		b[i] = alnum[int(sum[i])%len(alnum)]
	}
	return string(b)
}
