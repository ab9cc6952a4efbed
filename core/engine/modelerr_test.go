package engine_test

import (
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestModelFailureSaysWhatToFix: a failed model call ends the job with one
// sentence in the engine's locale that says what happened and the setting
// to change, the endpoint's URL filled in.
func TestModelFailureSaysWhatToFix(t *testing.T) {
	tests := []struct {
		name, locale string
		step         llmtest.Step
		want         string // {base} stands for the endpoint's base URL
	}{
		{"refused key", "en", llmtest.Status(401),
			"the model endpoint at {base} refused the key (llm.api_key / OPENAI_API_KEY): 401 Unauthorized: scripted Unauthorized"},
		{"refused key in Japanese", "ja", llmtest.Status(403),
			"{base} のモデルエンドポイントがキーを拒否しました（llm.api_key / OPENAI_API_KEY）: 403 Forbidden: scripted Forbidden"},
		{"model not found, no list", "en", llmtest.Status(404),
			"model test-model not found at {base}, which lists no models at /models either: check llm.base_url / OPENAI_BASE_URL"},
		{"HTML", "en", llmtest.Raw("<html><body>Please sign in</body></html>"),
			"the endpoint at {base} answered HTML, not an OpenAI-compatible API (llm.base_url / OPENAI_BASE_URL)"},
		{"kept failing", "en", llmtest.Status(503),
			"the language model kept failing: 503 Service Unavailable (retries: 0)"},
		{"kept failing in Japanese", "ja", llmtest.Status(500),
			"言語モデルが失敗し続けました: 500 Internal Server Error（再試行 0 回）"},
		{"other refusal", "en", llmtest.Status(400).WithBody(`{"error":{"message":"Invalid schema for function 'Bash'"}}`),
			"the language model failed: 400 Bad Request: Invalid schema for function 'Bash'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, func(c *engine.Config) { c.Locale = tt.locale })
			f.srv.Script(tt.step)
			fin := f.run(f.start("chat", "x"))
			want := strings.ReplaceAll(tt.want, "{base}", f.srv.URL())
			if fin.To != core.JobFailed || fin.Error != want {
				t.Errorf("finish = %s %q\nwant failed %q", fin.To, fin.Error, want)
			}
		})
	}
}
