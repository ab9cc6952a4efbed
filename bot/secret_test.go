package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestSecretRedactsByValue: a Secret hides its whole value and nothing
// else, however short it is: with Ollama's key "ollama" the base URL
// http://ollama:11434/v1 and the model ollama/llama3 print as they are,
// and a key "x" leaves every other field alone.
func TestSecretRedactsByValue(t *testing.T) {
	const (
		projKey = "sk-proj-Xk3vQ9tL2mN8pR4sW7yZ1aB5cD6eF0gH"
		slack   = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp"
	)
	cfg := DefaultConfig()
	cfg.LLM.BaseURL, cfg.LLM.Model, cfg.LLM.APIKey = "http://ollama:11434/v1", "ollama/llama3", "ollama"
	cfg.API.Token = "x"
	cfg.Slack.BotToken = slack
	cfg.Discord.BotToken = projKey

	check := func(t *testing.T, got Config) {
		t.Helper()
		if got.LLM.BaseURL != cfg.LLM.BaseURL || got.LLM.Model != cfg.LLM.Model || got.DataDir != cfg.DataDir {
			t.Errorf("fields beside the secrets changed: base_url %q, model %q, data_dir %q", got.LLM.BaseURL, got.LLM.Model, got.DataDir)
		}
		for name, s := range map[string]Secret{"llm.api_key": got.LLM.APIKey, "api.token": got.API.Token, "slack.bot_token": got.Slack.BotToken, "discord.bot_token": got.Discord.BotToken} {
			if s != redacted {
				t.Errorf("%s = %q, want %s", name, s.Reveal(), redacted)
			}
		}
		if got.Slack.AppToken != "" {
			t.Errorf("an empty secret came back as %q", got.Slack.AppToken.Reveal())
		}
	}
	t.Run("yaml", func(t *testing.T) {
		b, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got Config
		if err := yaml.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		check(t, got)
	})
	t.Run("json", func(t *testing.T) {
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got Config
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		check(t, got)
	})
	t.Run("log and fmt", func(t *testing.T) {
		var b bytes.Buffer
		slog.New(slog.NewTextHandler(&b, nil)).Info("config", "llm", cfg.LLM, "slack", cfg.Slack)
		out := b.String() + fmt.Sprintf("%+v", cfg)
		for _, want := range []string{"http://ollama:11434/v1", "ollama/llama3", "APIKey:" + redacted} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		for _, leak := range []string{projKey, slack, "APIKey:ollama", "Token:x"} {
			if strings.Contains(out, leak) {
				t.Errorf("output shows %q:\n%s", leak, out)
			}
		}
	})
}
