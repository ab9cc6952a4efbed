package engine

import (
	"fmt"
	"testing"

	"github.com/baton-bot/baton/core/llm"
)

// TestModelFailureWords: every Kind of model failure has its sentence in
// each locale, the model list cut as the llm package cut it.
func TestModelFailureWords(t *testing.T) {
	const base = "http://ollama:11434/v1"
	tests := []struct {
		err    error
		en, ja string
	}{
		{
			fmt.Errorf("llm: %w", &llm.Error{Kind: llm.KindModelNotFound, URL: base, Model: "llama3", Listed: true, Models: []string{"llama3.1:8b", "qwen2.5"}, MoreModels: 4998}),
			"model llama3 not found at " + base + " (models there: llama3.1:8b, qwen2.5 and 4998 more)",
			"モデル llama3 は " + base + " にありません（あるモデル: llama3.1:8b, qwen2.5 ほか 4998 件）",
		},
		{
			&llm.Error{Kind: llm.KindModelNotFound, URL: base, Model: "llama3", Listed: true},
			"model llama3 not found at " + base + ", which lists no models",
			"モデル llama3 は " + base + " にありません（モデル一覧は空です）",
		},
		{
			&llm.Error{Kind: llm.KindNoKey, URL: "https://api.openai.com/v1"},
			"llm.api_key is empty (set OPENAI_API_KEY): the model endpoint at https://api.openai.com/v1 needs an API key",
			"llm.api_key が空です（OPENAI_API_KEY を設定してください）。https://api.openai.com/v1 のモデルエンドポイントには API キーが必要です",
		},
		{
			&llm.Error{Kind: llm.KindUnreachable, URL: base, Reason: "connection refused"},
			"nothing answers at " + base + " (llm.base_url / OPENAI_BASE_URL): connection refused",
			base + " に応答がありません（llm.base_url / OPENAI_BASE_URL）: connection refused",
		},
	}
	en, err := loadTexts("en")
	if err != nil {
		t.Fatal(err)
	}
	ja, err := loadTexts("ja")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if got := en.modelFailure(tt.err); got != tt.en {
			t.Errorf("en:\n got %q\nwant %q", got, tt.en)
		}
		if got := ja.modelFailure(tt.err); got != tt.ja {
			t.Errorf("ja:\n got %q\nwant %q", got, tt.ja)
		}
	}
}
