package llm_test

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
)

var updateReadme = flag.Bool("update", false, "rewrite the README's provider table")

func TestDetectProvider(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"https://api.openai.com/v1":                                      "openai",
		"https://myres.openai.azure.com/openai/deployments/gpt-4o":       "azure",
		"https://openrouter.ai/api/v1":                                   "openrouter",
		"http://localhost:11434/v1":                                      "ollama",
		"http://192.168.1.20:8000/v1":                                    "vllm",
		"http://127.0.0.1:8080/v1":                                       "llamacpp",
		"https://api.groq.com/openai/v1":                                 "groq",
		"https://api.deepseek.com/v1":                                    "deepseek",
		"https://api.mistral.ai/v1":                                      "mistral",
		"https://generativelanguage.googleapis.com/v1beta/openai/":       "gemini",
		"https://api.anthropic.com/v1/":                                  "anthropic",
		"https://llm.example.com:8000/v1":                                "", // a public host: its port says nothing
		"https://evil-api.openai.com.example.net/v1":                     "",
		"https://models.example.com/v1":                                  "",
		"https://x.openai.azure.com.attacker.example/openai/deployments": "",
	} {
		if got := llm.DetectProvider(url); got != want {
			t.Errorf("DetectProvider(%s) = %q, want %q", url, got, want)
		}
	}
	if _, err := llm.New(llm.Config{BaseURL: "http://localhost:1/v1", Provider: "openia"}); err == nil || !strings.Contains(err.Error(), "auto, openai, azure") {
		t.Errorf("an unknown provider: %v", err)
	}
}

// TestProviderTableInReadme: the README's provider table is Profiles.
func TestProviderTableInReadme(t *testing.T) {
	const open, end = "<!-- provider-table: generated from core/llm/providers.go by `go test ./core/llm -run TestProviderTableInReadme -update` -->", "<!-- end of provider-table -->"
	var b strings.Builder
	b.WriteString("| `llm.provider` | provider | auto-detected by | token limit | key header | not sent or not supported | rate-limit headers read | context overflow recognised by | note |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	yes := func(v bool, s string) string {
		if v {
			return s
		}
		return ""
	}
	for _, p := range llm.Profiles {
		var ways []string
		if len(p.Hosts) > 0 {
			ways = append(ways, strings.Join(p.Hosts, ", "))
		}
		if p.ListedBy != "" {
			ways = append(ways, "model list: "+p.ListedBy)
		}
		if p.Port != "" {
			ways = append(ways, "local port "+p.Port)
		}
		by := strings.Join(ways, "; ")
		limit := "`max_tokens`"
		if len(p.CompletionTokensModels) > 0 {
			limit += "; `max_completion_tokens` for " + strings.Join(p.CompletionTokensModels, ", ") + "…"
		}
		key := "`Authorization: Bearer`"
		if p.KeyHeader != "" {
			key = "`" + p.KeyHeader + "`"
		}
		if p.APIVersion != "" {
			key += ", `api-version=" + p.APIVersion + "`"
		}
		for _, h := range sortedKeys(p.Headers) {
			key += ", `" + h + "`"
		}
		var no []string
		for _, s := range []string{yes(p.NoParallel, "`parallel_tool_calls`"), yes(p.NoRequired, "`tool_choice: required` (sent as auto)"),
			yes(p.NoImages, "images"), yes(p.NoStreamUsage, "usage in streams (estimated)")} {
			if s != "" {
				no = append(no, s)
			}
		}
		fmt := func(xs []string) string {
			if len(xs) == 0 {
				return "—"
			}
			return "`" + strings.Join(xs, "`, `") + "`"
		}
		fmt2 := strings.Join(no, ", ")
		if fmt2 == "" {
			fmt2 = "—"
		}
		b.WriteString("| `" + p.Name + "` | " + p.Title + " | " + by + " | " + limit + " | " + key + " | " + fmt2 + " | " +
			fmt(p.RateLimitHeaders) + " | " + fmt(p.ContextErrors) + " | " + strings.ReplaceAll(p.Note, "|", "\\|") + " |\n")
	}
	table := b.String()
	const path = "../../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i, j := strings.Index(text, open), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %q … %q block", open, end)
	}
	got := strings.TrimPrefix(text[i+len(open):j], "\n")
	if *updateReadme {
		text = text[:i+len(open)] + "\n" + table + text[j:]
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != table {
		t.Errorf("the README's provider table is out of date; run\n\tgo test ./core/llm -run TestProviderTableInReadme -update\nwant:\n%s\ngot:\n%s", table, got)
	}
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func TestProviderHeaders(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		srv := llmtest.NewServer(t)
		srv.Script(llmtest.Text("a"), llmtest.Text("b"))
		az, err := llm.New(llm.Config{BaseURL: srv.URL(), APIKey: "az-key-123", Model: "gpt-4o", Provider: "azure", Stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := az.Complete(context.Background(), userRequest("hi")); err != nil {
			t.Fatalf("azure: %v", err)
		}
		or, _ := llm.New(llm.Config{BaseURL: srv.URL(), APIKey: "or-key", Model: "x/y", Provider: "openrouter", Stream: stream})
		if _, err := or.Complete(context.Background(), userRequest("hi")); err != nil {
			t.Fatalf("openrouter: %v", err)
		}
		reqs := srv.Requests()
		a, o := reqs[0], reqs[1]
		if a.Header.Get("api-key") != "az-key-123" || a.Header.Get("Authorization") != "" || a.Query.Get("api-version") != "2024-10-21" {
			t.Errorf("stream %v: azure sent api-key %q, Authorization %q, api-version %q", stream,
				a.Header.Get("api-key"), a.Header.Get("Authorization"), a.Query.Get("api-version"))
		}
		if o.Header.Get("Authorization") != "Bearer or-key" || o.Header.Get("X-Title") != "Baton" || o.Header.Get("HTTP-Referer") == "" {
			t.Errorf("stream %v: openrouter headers %v", stream, o.Header)
		}
	}
}

func TestMaxCompletionTokensLearntPerModel(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		h := newHarness(t, func(c *llm.Config) { c.Stream = stream; c.Model = "house-reasoner" })
		h.srv.Script(
			llmtest.Status(400).WithBody(`{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`),
			llmtest.Text("one"), llmtest.Text("two"), llmtest.Text("other"))
		req := userRequest("hi")
		req.MaxTokens = 100
		for _, want := range []string{"one", "two"} {
			resp, err := h.client.Complete(context.Background(), req)
			if err != nil || resp.Message.Content != want {
				t.Fatalf("stream %v: %q, %v", stream, resp.Message.Content, err)
			}
		}
		req.Model = "plain-model"
		if _, err := h.client.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		var params []string
		for _, r := range h.srv.Requests() {
			params = append(params, r.MaxTokensParam)
		}
		if strings.Join(params, ",") != "max_tokens,max_completion_tokens,max_completion_tokens,max_tokens" {
			t.Errorf("stream %v: parameters sent %v", stream, params)
		}
		if len(h.waits()) != 0 {
			t.Errorf("stream %v: waited %v before sending again", stream, h.waits())
		}
	}
	// Known up front: OpenAI's reasoning models.
	h := newHarness(t, func(c *llm.Config) { c.Provider = "openai"; c.Model = "gpt-5-mini"; c.ReasoningEffort = "low" })
	h.srv.Script(llmtest.Text("ok"))
	req := userRequest("hi")
	req.MaxTokens = 100
	if _, err := h.client.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if r := h.srv.Requests()[0]; r.MaxTokensParam != "max_completion_tokens" || r.ReasoningEffort != "low" {
		t.Errorf("gpt-5-mini sent %s, reasoning_effort %q", r.MaxTokensParam, r.ReasoningEffort)
	}
}

func TestReasoningKeptOut(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		for _, provider := range []string{"auto", "deepseek"} {
			h := newHarness(t, func(c *llm.Config) { c.Stream = stream; c.Provider = provider })
			step := llmtest.Call("Read", `{"path":"a"}`).WithReasoning("Let me think: the file a first.").Streamed(5)
			u := llmtest.Usage{PromptTokens: 50, CompletionTokens: 40}
			step.Usage = &u
			h.srv.Script(step, llmtest.Text("done"), llmtest.Text("next turn"))
			req := toolsReq("read a", "Read")
			resp, err := h.client.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Reasoning != "Let me think: the file a first." || resp.Message.Content != "" {
				t.Errorf("%s stream %v: reasoning %q content %q", provider, stream, resp.Message.Reasoning, resp.Message.Content)
			}
			req.Messages = append(req.Messages, resp.Message, llm.Message{Role: llm.RoleTool, ToolCallID: resp.Message.ToolCalls[0].ID, Content: "text of a"})
			if _, err := h.client.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: "done"}, llm.Message{Role: llm.RoleUser, Content: "more"})
			if _, err := h.client.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			reqs := h.srv.Requests()
			within, after := reqs[1].Messages[1].ReasoningContent, reqs[2].Messages[1].ReasoningContent
			wantWithin := ""
			if provider == "deepseek" {
				wantWithin = "Let me think: the file a first."
			}
			if within != wantWithin || after != "" {
				t.Errorf("%s stream %v: reasoning sent back within the turn %q, after it %q", provider, stream, within, after)
			}
		}
	}
}

func TestReasoningTokensCounted(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		h := newHarness(t, func(c *llm.Config) { c.Stream = stream })
		usage := `"usage":{"prompt_tokens":20,"completion_tokens":300,"total_tokens":320,"completion_tokens_details":{"reasoning_tokens":256}}`
		if stream {
			h.srv.Script(llmtest.SSEBody(`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"4"},"finish_reason":"stop"}]}` + "\n\n" +
				`data: {"choices":[],` + usage + "}\n\ndata: [DONE]\n\n"))
		} else {
			h.srv.Script(llmtest.Raw(`{"choices":[{"index":0,"message":{"role":"assistant","content":"4"},"finish_reason":"stop"}],` + usage + `}`))
		}
		resp, err := h.client.Complete(context.Background(), userRequest("2+2"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage.ReasoningTokens != 256 || resp.Usage.CompletionTokens != 300 {
			t.Errorf("stream %v: usage %+v", stream, resp.Usage)
		}
	}
}

func TestToolChoiceRequiredWhereUnsupported(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *llm.Config) { c.Provider = "ollama" })
	h.srv.Script(llmtest.Call("Read", `{}`))
	req := toolsReq("x", "Read")
	req.ToolChoice = llm.ToolChoiceRequired
	if _, err := h.client.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Requests()[0].ToolChoice; got != "auto" {
		t.Errorf("tool_choice sent to ollama %q, want auto", got)
	}
}

func TestRateLimitResetHeaders(t *testing.T) {
	t.Parallel()
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.Header().Set("x-ratelimit-remaining-requests", "12")
			w.Header().Set("x-ratelimit-reset-requests", "1s")
			w.Header().Set("x-ratelimit-remaining-tokens", "0")
			w.Header().Set("x-ratelimit-reset-tokens", "6m0s")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached for gpt-4.1-mini on tokens per min (TPM)","type":"tokens","code":"rate_limit_exceeded"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	var waits []time.Duration
	for _, provider := range []string{"groq", "anthropic"} {
		calls, waits = 0, nil
		c, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m", MaxRetries: 1, Provider: provider,
			Sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Complete(context.Background(), userRequest("hi")); err != nil {
			t.Fatal(err)
		}
		if provider == "groq" && (len(waits) != 1 || waits[0] != 5*time.Minute) {
			t.Errorf("groq: waits %v, want the tokens' reset, capped at 5m", waits)
		}
		if provider == "anthropic" && (len(waits) != 1 || waits[0] > 2*time.Second) {
			t.Errorf("anthropic (reads no x-ratelimit-reset-*): waits %v, want the backoff's", waits)
		}
	}
}

func TestMistralCallIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *llm.Config) { c.Provider = "mistral" })
	// A call written as text gets an id Baton makes; a server's own id of
	// another form is rewritten too.
	h.srv.Script(llmtest.Text(`{"name": "Read", "arguments": {"path": "a"}}`), llmtest.Step{ToolCalls: []llmtest.ToolCall{{ID: "call_0", Name: "Read", Arguments: `{}`}, {ID: "D681PevKs", Name: "Read", Arguments: `{}`}}})
	for range 2 {
		resp, err := h.client.Complete(context.Background(), toolsReq("x", "Read"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.Message.ToolCalls {
			if len(c.ID) != 9 || strings.Trim(c.ID, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") != "" {
				t.Errorf("call id %q is not nine letters and digits", c.ID)
			}
		}
		if n := len(resp.Message.ToolCalls); n == 2 && resp.Message.ToolCalls[1].ID != "D681PevKs" {
			t.Errorf("the server's own nine-character id was changed to %q", resp.Message.ToolCalls[1].ID)
		}
	}
}
