package llm_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/baton-bot/baton/core/llm"
)

// modelLists are model list answers shaped as each provider documents
// its GET /models (the sources are named at llm.ProviderFromModels).
var modelLists = map[string]string{
	llm.ProviderVLLM:       `{"object":"list","data":[{"id":"Qwen/Qwen2.5-7B-Instruct","object":"model","created":1733000000,"owned_by":"vllm","root":"Qwen/Qwen2.5-7B-Instruct","parent":null,"max_model_len":32768,"permission":[]}]}`,
	llm.ProviderLlamaCpp:   `{"object":"list","data":[{"id":"qwen2.5-7b-instruct-q4_k_m.gguf","object":"model","created":1733000000,"owned_by":"llamacpp","meta":{"vocab_type":2,"n_vocab":152064,"n_ctx_train":32768,"n_embd":3584,"n_params":7615616512,"size":4677120000}}]}`,
	llm.ProviderOllama:     `{"object":"list","data":[{"id":"llama3.1:latest","object":"model","created":1733000000,"owned_by":"library"}]}`,
	llm.ProviderOpenRouter: `{"data":[{"id":"openai/gpt-4o","name":"OpenAI: GPT-4o","created":1715367049,"context_length":128000,"architecture":{"modality":"text+image->text","tokenizer":"GPT"},"pricing":{"prompt":"0.0000025","completion":"0.00001"},"top_provider":{"context_length":128000}}]}`,
	llm.ProviderGroq:       `{"object":"list","data":[{"id":"llama-3.3-70b-versatile","object":"model","created":1733447754,"owned_by":"Meta","active":true,"context_window":131072,"public_apps":null}]}`,
	llm.ProviderMistral:    `{"object":"list","data":[{"id":"mistral-large-latest","object":"model","created":1733000000,"owned_by":"mistralai","capabilities":{"completion_chat":true,"function_calling":true,"vision":false},"max_context_length":131072}]}`,
	llm.ProviderDeepSeek:   `{"object":"list","data":[{"id":"deepseek-chat","object":"model","owned_by":"deepseek"},{"id":"deepseek-reasoner","object":"model","owned_by":"deepseek"}]}`,
	llm.ProviderGemini:     `{"object":"list","data":[{"id":"models/gemini-2.0-flash","object":"model","owned_by":"google"}]}`,
	llm.ProviderAnthropic:  `{"data":[{"type":"model","id":"claude-sonnet-4-20250514","display_name":"Claude Sonnet 4","created_at":"2025-05-22T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-20250514","last_id":"claude-sonnet-4-20250514"}`,
}

// TestProviderFromModels: each provider's list names it; lists that tell
// nothing (OpenAI's own, a proxy's, a fine-tuned model's id, not JSON)
// name none.
func TestProviderFromModels(t *testing.T) {
	for _, p := range llm.Profiles {
		if _, ok := modelLists[p.Name]; ok != (p.ListedBy != "") {
			t.Errorf("%s: ListedBy %q, and a model list in this test: %v; want both or neither", p.Name, p.ListedBy, ok)
		}
	}
	for want, body := range modelLists {
		if got := llm.ProviderFromModels([]byte(body)); got != want {
			t.Errorf("%s's list: got %q", want, got)
		}
	}
	for _, body := range []string{
		`{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"system"}]}`,
		`{"object":"list","data":[{"id":"ft:gpt-4o-mini:acme::abc123","object":"model","owned_by":"acme"}]}`,
		`{"object":"list","data":[]}`,
		`<html>login</html>`,
		``,
	} {
		if got := llm.ProviderFromModels([]byte(body)); got != "" {
			t.Errorf("%s: got %q, want none", body, got)
		}
	}
}

// TestDetect: llm.provider set is taken as it is; auto takes a known host
// without asking anything, then the model list (before the port: vLLM on
// llama.cpp's 8080 is vLLM), then the port; an endpoint that lists
// nothing telling is none, and the list is asked for with the key.
func TestDetect(t *testing.T) {
	asked := 0
	var auth string
	list := modelLists[llm.ProviderVLLM]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		auth = r.Header.Get("Authorization")
		if r.URL.Path != "/v1/models" || list == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(list))
	}))
	defer srv.Close()
	ctx := context.Background()
	cases := []struct {
		name, provider, base string
		list                 string
		want, how            string
	}{
		{"configured", "mistral", srv.URL + "/v1", modelLists[llm.ProviderVLLM], "mistral", llm.FoundByConfig},
		{"host", "auto", "https://api.groq.com/openai/v1", "", "groq", llm.FoundByHost},
		{"list", "auto", srv.URL + "/v1", modelLists[llm.ProviderVLLM], "vllm", llm.FoundByModelList},
		{"unknown", "", srv.URL + "/v1", `{"object":"list","data":[{"id":"m","owned_by":"someone"}]}`, "", llm.FoundNone},
		{"no list", "auto", srv.URL + "/v1", "", "", llm.FoundNone},
	}
	for _, c := range cases {
		list, asked = c.list, 0
		got, how := llm.Detect(ctx, srv.Client(), c.provider, c.base, "sk-probe")
		if got != c.want || how != c.how {
			t.Errorf("%s: Detect = %q by %q, want %q by %q", c.name, got, how, c.want, c.how)
		}
		if (c.how == llm.FoundByConfig || c.how == llm.FoundByHost) && asked != 0 {
			t.Errorf("%s: the endpoint was asked %d times, want none", c.name, asked)
		}
		if c.how == llm.FoundByModelList && auth != "Bearer sk-probe" {
			t.Errorf("%s: the list was asked for with Authorization %q", c.name, auth)
		}
	}
	// Nothing listening: the port decides.
	got, how := llm.Detect(ctx, nil, "auto", "http://127.0.0.1:1/v1", "")
	if got != "" || how != llm.FoundNone {
		t.Errorf("nothing listening on port 1: %q by %q", got, how)
	}
}
