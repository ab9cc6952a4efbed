package llm

import (
	"strings"
	"testing"
)

const (
	projKey  = "sk-proj-Xk3vQ9tL2mN8pR4sW7yZ1aB5cD6eF0gH_a-b"
	slackKey = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
)

// TestRedactLeaksNothing: wherever a log line or an error carries a key —
// an Authorization header, a URL's userinfo, a JSON body, plain text —
// the key is gone, whatever its length.
func TestRedactLeaksNothing(t *testing.T) {
	for _, key := range []string{"ollama", "x", projKey, slackKey} {
		r := newRedactor(key)
		for _, tmpl := range []string{
			"Authorization: Bearer KEY",
			"authorization=Bearer KEY\r\nx-request-id: 7",
			`request failed: Post "http://baton:KEY@localhost:11434/v1/chat/completions": EOF`,
			"https://KEY@git.example.com/repo.git",
			`{"error":{"message":"Incorrect API key provided: KEY","code":"invalid_api_key"}}`,
			`{"api_key":"KEY"}`,
			"the key KEY was refused.",
			"api_key=KEY&model=m",
			"KEY",
			"token: KEY, then more",
			"(KEY)",
		} {
			in := strings.ReplaceAll(tmpl, "KEY", key)
			got := r.redact(in)
			want := strings.ReplaceAll(tmpl, "KEY", redactedText)
			if got != want {
				t.Errorf("key %.12q: redact(%q)\n got %q\nwant %q", key, in, got, want)
			}
		}
	}
}

// TestRedactLongKeysInsideText: a key of 8 characters or more is redacted
// inside other text too.
func TestRedactLongKeysInsideText(t *testing.T) {
	for _, key := range []string{projKey, slackKey, "12345678"} {
		r := newRedactor(key)
		for _, tmpl := range []string{"prefixKEYsuffix", "https://proxy.example/KEY/v1", "KEY.KEY", "a-KEY-b"} {
			in := strings.ReplaceAll(tmpl, "KEY", key)
			if got, want := r.redact(in), strings.ReplaceAll(tmpl, "KEY", redactedText); got != want {
				t.Errorf("redact(%q) = %q, want %q", in, got, want)
			}
		}
	}
}

// TestRedactMangleNothing: a short key inside a word, a host, a path or a
// model name, or used as a name rather than a value, stays.
func TestRedactMangleNothing(t *testing.T) {
	tests := []struct {
		key, text string
	}{
		{"ollama", "http://localhost:11434/v1"},
		{"ollama", "Post \"http://ollama:11434/v1/chat/completions\": dial tcp: lookup ollama: no such host"},
		{"ollama", "model ollama/llama3 not found"},
		{"ollama", "http://ollama.internal:11434/v1"},
		{"ollama", "https://example.com/ollama/v1"},
		{"ollama", "ollama-2 ollama_b ollamas myollama ollama.local"},
		{"ollama", "ollama=1 ollama:11434"},
		{"ollama", "pull llama3:ollama3"},
		{"x", "the model does not exist"},
		{"x", "1920x1080 x86_64 x-request-id x.example.com api.x.com"},
		{"x", "x=1 and x:2"},
		{"ollama", "Ollama answered"},
		{"sk", "task sk-1"},
	}
	for _, tt := range tests {
		r := newRedactor(tt.key)
		if got := r.redact(tt.text); got != tt.text {
			t.Errorf("key %q: redact(%q) = %q, want it unchanged", tt.key, tt.text, got)
		}
	}
}

// TestRedactURLs: URLs keep scheme, host and port; the userinfo's password
// is redacted whether it is a known secret or not.
func TestRedactURLs(t *testing.T) {
	r := newRedactor("ollama")
	for in, want := range map[string]string{
		"redis://:hunter2@127.0.0.1:6379/0":             "redis://:[redacted]@127.0.0.1:6379/0",
		"http://alice:p%40ss@proxy.example:3128 failed": "http://alice:[redacted]@proxy.example:3128 failed",
		"http://ollama@ollama:11434/v1":                 "http://[redacted]@ollama:11434/v1",
		"http://alice@example.com/x":                    "http://alice@example.com/x",
		"see https://example.com:8443/v1?model=ollama":  "see https://example.com:8443/v1?model=[redacted]",
		"mail ollama@example.com":                       "mail ollama@example.com",
		"two: http://a:b@h1/ and http://c:d@h2/":        "two: http://a:[redacted]@h1/ and http://c:[redacted]@h2/",
	} {
		if got := r.redact(in); got != want {
			t.Errorf("redact(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}

// TestRedactSeveral: several secrets, overlapping or not, and none.
func TestRedactSeveral(t *testing.T) {
	r := newRedactor(projKey, "ollama", "", "  ")
	in := "Bearer " + projKey + " then key=ollama at http://ollama:11434 and " + projKey[:12]
	want := "Bearer [redacted] then key=[redacted] at http://ollama:11434 and " + projKey[:12]
	if got := r.redact(in); got != want {
		t.Errorf("redact = %q, want %q", got, want)
	}
	over := newRedactor("abcdefghij", "efghijklmn")
	if got := over.redact("xxabcdefghijklmnxx"); got != "xx[redacted]xx" {
		t.Errorf("overlapping secrets = %q", got)
	}
	if got := newRedactor().redact("Bearer x"); got != "Bearer x" {
		t.Errorf("no secrets = %q", got)
	}
}
