package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// How Detect found the provider.
const (
	FoundByConfig    = "llm.provider"               // set by the operator
	FoundByHost      = "the base URL's host"        // a provider's API host
	FoundByModelList = "the endpoint's model list"  // GET {base}/models
	FoundByPort      = "the local server's port"    // a local server's usual port
	FoundNone        = "none: OpenAI's conventions" // unknown: the generic profile
)

// Detect names the provider that llm.provider (name) stands for at
// baseURL, and how it was found: a name other than auto is taken as it
// is; auto takes a known API host, then what the endpoint's model list
// says (ProviderFromModels; the list is asked for once, with apiKey, and
// ctx bounds the wait), then a local server's usual port; "" (FoundNone)
// when none tells. The model list comes before the port because local
// servers share ports (vLLM is often started on llama.cpp's 8080).
func Detect(ctx context.Context, hc *http.Client, name, baseURL, apiKey string) (provider, how string) {
	if name != "" && name != ProviderAuto {
		return name, FoundByConfig
	}
	if p := detectHost(baseURL); p != "" {
		return p, FoundByHost
	}
	if p := probeModels(ctx, hc, baseURL, apiKey); p != "" {
		return p, FoundByModelList
	}
	if p := DetectProvider(baseURL); p != "" {
		return p, FoundByPort
	}
	return "", FoundNone
}

// detectHost is DetectProvider by host alone.
func detectHost(baseURL string) string {
	p := DetectProvider(baseURL)
	for _, prof := range Profiles {
		if prof.Name == p && len(prof.Hosts) > 0 {
			return p
		}
	}
	return ""
}

// probeModels asks GET {baseURL}/models and names the provider by the
// list's shape; "" when the endpoint does not answer with a list or the
// list does not tell.
func probeModels(ctx context.Context, hc *http.Client, baseURL, apiKey string) string {
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/models", nil)
	if err != nil {
		return ""
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return ""
	}
	return ProviderFromModels(body)
}

// ProviderFromModels names the provider whose GET {base}/models answer is
// body, by what only that provider's list carries, "" when nothing does
// (a list of bare ids and owners, as OpenAI's and many proxies' are). The
// signs, from each provider's API reference:
//
//   - vLLM: owned_by "vllm", with max_model_len
//     (docs.vllm.ai, OpenAI-compatible server, /v1/models);
//   - llama.cpp's server: owned_by "llamacpp", with meta (n_ctx_train …)
//     (github.com/ggml-org/llama.cpp, tools/server/README.md, GET /v1/models);
//   - Ollama: owned_by "library", or an id tagged :latest
//     (github.com/ollama/ollama, docs/openai.md, /v1/models);
//   - OpenRouter: entries with pricing and architecture
//     (openrouter.ai/docs/api-reference/list-available-models);
//   - Groq: entries with active and context_window
//     (console.groq.com/docs/api-reference#models-list);
//   - Mistral: entries with capabilities.completion_chat
//     (docs.mistral.ai/api, GET /v1/models);
//   - DeepSeek: owned_by "deepseek" (api-docs.deepseek.com, list models);
//   - Gemini: ids that start with models/ (ai.google.dev/gemini-api/docs/openai, list models);
//   - Anthropic: entries of type "model" with display_name
//     (docs.anthropic.com/en/api/models-list).
func ProviderFromModels(body []byte) string {
	var list struct {
		Data []map[string]json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil {
		return ""
	}
	str := func(m map[string]json.RawMessage, k string) string {
		var s string
		_ = json.Unmarshal(m[k], &s)
		return s
	}
	for _, m := range list.Data {
		id, owner := str(m, "id"), str(m, "owned_by")
		_, hasMaxLen := m["max_model_len"]
		_, hasPricing := m["pricing"]
		_, hasArch := m["architecture"]
		_, hasActive := m["active"]
		_, hasWindow := m["context_window"]
		_, hasDisplay := m["display_name"]
		var caps map[string]json.RawMessage
		_ = json.Unmarshal(m["capabilities"], &caps)
		_, chat := caps["completion_chat"]
		switch {
		case owner == "vllm" || (hasMaxLen && str(m, "root") != ""):
			return ProviderVLLM
		case owner == "llamacpp":
			return ProviderLlamaCpp
		case owner == "library" || (strings.HasSuffix(id, ":latest") && !strings.HasPrefix(id, "ft:")):
			return ProviderOllama
		case hasPricing && hasArch:
			return ProviderOpenRouter
		case hasActive && hasWindow:
			return ProviderGroq
		case chat || owner == "mistralai":
			return ProviderMistral
		case owner == "deepseek":
			return ProviderDeepSeek
		case strings.HasPrefix(id, "models/"):
			return ProviderGemini
		case str(m, "type") == "model" && hasDisplay:
			return ProviderAnthropic
		}
	}
	return ""
}
