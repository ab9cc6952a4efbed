package llmtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestPromptCache: the server serves from its cache the longest byte
// prefix a request shares with an earlier one, from 1,024 tokens on, in
// steps of 128, and counts what no cache could have served.
func TestPromptCache(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.ModelPromptCache()
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 40000)
	sys := llm.Message{Role: llm.RoleSystem, Content: long}
	user := llm.Message{Role: llm.RoleUser, Content: "first"}
	srv.Script(
		llmtest.Text("a").WithUsage(4000, 1),
		llmtest.Text("b").WithUsage(8000, 1),
		llmtest.Text("c").WithUsage(4000, 1),
		llmtest.Text("d").WithUsage(500, 1),
	)
	ask := func(msgs ...llm.Message) llm.Usage {
		t.Helper()
		r, err := client.Complete(context.Background(), llm.Request{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		return r.Usage
	}
	if u := ask(sys, user); u.CachedTokens != 0 {
		t.Errorf("first request: %d cached, want 0", u.CachedTokens)
	}
	// The same prefix and as much again: about half is cached, in steps of 128.
	second := ask(sys, user, llm.Message{Role: llm.RoleAssistant, Content: "a"}, llm.Message{Role: llm.RoleUser, Content: long})
	if u := second; u.CachedTokens%128 != 0 || u.CachedTokens < 3840 || u.CachedTokens > 4096 {
		t.Errorf("second request: %d cached of 8000, want about half in steps of 128", u.CachedTokens)
	}
	// One byte changed at the start: nothing is cached.
	if u := ask(llm.Message{Role: llm.RoleSystem, Content: "y" + long[1:]}, user); u.CachedTokens != 0 {
		t.Errorf("changed system prompt: %d cached, want 0", u.CachedTokens)
	}
	// A prefix under 1,024 tokens is not cached.
	if u := ask(llm.Message{Role: llm.RoleSystem, Content: "y" + long[1:]}, user); u.CachedTokens != 0 {
		t.Errorf("a 500-token prompt: %d cached, want 0", u.CachedTokens)
	}
	st := srv.CacheStats()
	if st.PromptTokens != 16500 || st.CachedTokens != second.CachedTokens {
		t.Errorf("stats %+v", st)
	}
	if st.NewTokens <= 0 || st.NewTokens >= st.PromptTokens {
		t.Errorf("new tokens %d of %d", st.NewTokens, st.PromptTokens)
	}
}
