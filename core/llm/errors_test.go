package llm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llm"
	"github.com/google/go-cmp/cmp"
)

const realKey = "sk-proj-Xk3vQ9tL2mN8pR4sW7yZ1aB5cD6eF0gH"

// endpoint is a real HTTP server standing in for a model endpoint: chat
// answers POST /v1/chat/completions, models (nil: 404) GET /v1/models.
func endpoint(t testing.TB, chat, models http.HandlerFunc) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", chat)
	if models != nil {
		mux.HandleFunc("GET /v1/models", models)
	}
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, loginPage)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

const loginPage = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body><form>…</form></body></html>"

// answer replies with status, a content type and body.
func answer(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

func jsonError(status int, msg string) http.HandlerFunc {
	return answer(status, "application/json", fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error"}}`, msg))
}

func modelList(ids ...string) http.HandlerFunc {
	var b strings.Builder
	b.WriteString(`{"object":"list","data":[`)
	for i, id := range ids {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":%q,"object":"model","owned_by":"x"}`, id)
	}
	b.WriteString("]}")
	return answer(http.StatusOK, "application/json", b.String())
}

const okReply = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`

// probe is a client with its requests counted at the transport (refused
// connections and unknown hosts included), its waits and its log kept.
type probe struct {
	client *llm.Client
	sent   atomic.Int32
	logs   syncBuffer
	mu     sync.Mutex
	waits  []time.Duration // guarded by mu
}

type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int32
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func newProbe(t testing.TB, base, key, model string, tr *http.Transport) *probe {
	t.Helper()
	p := &probe{}
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := llm.New(llm.Config{
		BaseURL: base, APIKey: key, Model: model, MaxRetries: 3, Timeout: 30 * time.Second,
		HTTPClient: &http.Client{Transport: countingTransport{tr, &p.sent}},
		Logger:     slog.New(slog.NewTextHandler(&p.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep: func(ctx context.Context, d time.Duration) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.waits = append(p.waits, d)
			return ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.client = c
	return p
}

func (p *probe) waited() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.waits...)
}

// logLines returns the lines of the log that contain s.
func (p *probe) logLines(s string) []string {
	var out []string
	for _, l := range strings.Split(p.logs.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// closedPort returns an address where nothing listens.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestFailuresSayWhatHappened: each failure a person can fix is one
// sentence naming the URL (without credentials) and the setting, is not
// retried, and costs the requests it needs and no more.
func TestFailuresSayWhatHappened(t *testing.T) {
	t.Parallel()
	const local = "__local__" // replaced by the test server's base URL
	manyModels := make([]string, 0, 5000)
	for i := range 4998 {
		manyModels = append(manyModels, fmt.Sprintf("model-%04d", i))
		if i == 2500 {
			manyModels = append(manyModels, "openai/gpt-4o", "openai/gpt-4o-mini")
		}
	}
	refused := "http://" + closedPort(t) + "/v1"
	tests := []struct {
		name     string
		base     string // "": the test server
		key      string
		model    string
		chat     http.HandlerFunc
		models   http.HandlerFunc
		want     string // the error's sentence, local standing for the base URL
		kind     llm.Kind
		status   int // the wrapped *StatusError's code, 0 for none
		requests int32
	}{
		{
			name: "401 echoing the key", key: realKey,
			chat: jsonError(401, "Incorrect API key provided: "+realKey+"."),
			want: "the model endpoint at " + local + " refused the key (llm.api_key / OPENAI_API_KEY): 401 Unauthorized: Incorrect API key provided: [redacted].",
			kind: llm.KindKeyRefused, status: 401, requests: 1,
		},
		{
			name: "403", key: realKey,
			chat: jsonError(403, "Project does not have access to model gpt-4o"),
			want: "the model endpoint at " + local + " refused the key (llm.api_key / OPENAI_API_KEY): 403 Forbidden: Project does not have access to model gpt-4o",
			kind: llm.KindKeyRefused, status: 403, requests: 1,
		},
		{
			name: "401 with a short key said back", key: "x",
			chat: jsonError(401, "the key x does not exist"),
			want: "the model endpoint at " + local + " refused the key (llm.api_key / OPENAI_API_KEY): 401 Unauthorized: the key [redacted] does not exist",
			kind: llm.KindKeyRefused, status: 401, requests: 1,
		},
		{
			name: "401 without a key",
			chat: jsonError(401, "You didn't provide an API key."),
			want: "llm.api_key is empty (set OPENAI_API_KEY): the model endpoint at " + local + " needs an API key",
			kind: llm.KindNoKey, status: 401, requests: 1,
		},
		{
			name: "OpenAI without a key: nothing sent", base: "https://api.openai.com/v1",
			want: "llm.api_key is empty (set OPENAI_API_KEY): the model endpoint at https://api.openai.com/v1 needs an API key",
			kind: llm.KindNoKey, requests: 0,
		},
		{
			name: "404 with the models there", key: realKey, model: "llama3",
			chat:   jsonError(404, `model "llama3" not found, try pulling it first`),
			models: modelList("qwen2.5:7b", "llama3.1:8b", "mistral"),
			want:   "model llama3 not found at " + local + " (models there: llama3.1:8b, qwen2.5:7b, mistral)",
			kind:   llm.KindModelNotFound, status: 404, requests: 2,
		},
		{
			name: "404 and no /models", key: realKey, model: "llama3",
			chat: answer(404, "text/plain", "404 page not found"),
			want: "model llama3 not found at " + local + ", which lists no models at /models either: check llm.base_url / OPENAI_BASE_URL",
			kind: llm.KindModelNotFound, status: 404, requests: 2,
		},
		{
			name: "404 and an empty list", key: realKey, model: "llama3",
			chat: jsonError(404, "The model `llama3` does not exist."), models: modelList(),
			want: "model llama3 not found at " + local + ", which lists no models",
			kind: llm.KindModelNotFound, status: 404, requests: 2,
		},
		{
			name: "404 among 5,000 models: one short line, like names first", key: realKey, model: "gpt-4o",
			chat: jsonError(404, "The model `gpt-4o` does not exist."), models: modelList(manyModels...),
			want: "model gpt-4o not found at " + local + " (models there: openai/gpt-4o, openai/gpt-4o-mini, " +
				"model-0000, model-0001, model-0002, model-0003, model-0004, model-0005, model-0006, model-0007 and 4990 more)",
			kind: llm.KindModelNotFound, status: 404, requests: 2,
		},
		{
			name: "connection refused", base: refused, key: realKey,
			want: "nothing answers at " + refused + " (llm.base_url / OPENAI_BASE_URL): connection refused",
			kind: llm.KindUnreachable, requests: 1,
		},
		{
			name: "a proxy's login page", key: realKey,
			chat: answer(200, "text/html", loginPage),
			want: "the endpoint at " + local + " answered HTML, not an OpenAI-compatible API (llm.base_url / OPENAI_BASE_URL)",
			kind: llm.KindNotAPI, requests: 1,
		},
		{
			name: "a login page without its content type", key: realKey,
			chat: answer(200, "application/octet-stream", loginPage),
			want: "the endpoint at " + local + " answered HTML, not an OpenAI-compatible API (llm.base_url / OPENAI_BASE_URL)",
			kind: llm.KindNotAPI, requests: 1,
		},
		{
			name: "a proxy asking to sign in", key: realKey,
			chat: answer(401, "text/html", loginPage),
			want: "the endpoint at " + local + " answered HTML, not an OpenAI-compatible API (llm.base_url / OPENAI_BASE_URL)",
			kind: llm.KindNotAPI, status: 401, requests: 1,
		},
		{
			name: "a redirect to a login page", key: realKey,
			chat: func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/login", http.StatusFound) },
			want: "the endpoint at " + local + " answered HTML, not an OpenAI-compatible API (llm.base_url / OPENAI_BASE_URL)",
			kind: llm.KindNotAPI, requests: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := tt.base
			if base == "" {
				base = endpoint(t, tt.chat, tt.models)
			}
			model := tt.model
			if model == "" {
				model = "gpt-4o"
			}
			p := newProbe(t, base, tt.key, model, nil)
			_, err := p.client.Complete(context.Background(), userRequest("go"))
			want := strings.ReplaceAll(tt.want, local, base)
			var le *llm.Error
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want an *llm.Error", err)
			}
			if got := le.Error(); got != want {
				t.Errorf("sentence:\n got %q\nwant %q", got, want)
			}
			if err.Error() != "llm: "+want {
				t.Errorf("err = %q, want the sentence after \"llm: \"", err)
			}
			if le.Kind != tt.kind {
				t.Errorf("kind = %d, want %d", le.Kind, tt.kind)
			}
			var se *llm.StatusError
			if got := errors.As(err, &se); got != (tt.status != 0) || (got && se.StatusCode != tt.status) {
				t.Errorf("wrapped StatusError = %v, want status %d", se, tt.status)
			}
			if errors.Is(err, llm.ErrUnavailable) {
				t.Errorf("err is ErrUnavailable: a person must fix this, retrying will not")
			}
			if n := p.sent.Load(); n != tt.requests {
				t.Errorf("%d requests sent, want %d", n, tt.requests)
			}
			if w := p.waited(); len(w) != 0 {
				t.Errorf("waited %v, want no retry", w)
			}
			if strings.Contains(want, "\n") || len(want) > 400 {
				t.Errorf("the sentence is not one short line (%d bytes)", len(want))
			}
			if lines := p.logLines(`level=WARN msg="llm: request`); len(lines) != 1 {
				t.Errorf("%d warnings, want 1:\n%s", len(lines), p.logs.String())
			}
			if strings.Contains(err.Error(), realKey) || strings.Contains(p.logs.String(), realKey) {
				t.Errorf("the key leaked:\n%v\n%s", err, p.logs.String())
			}
		})
	}
}

// TestUnknownHost: a base URL whose host does not resolve is said so, once,
// without retries.
func TestUnknownHost(t *testing.T) {
	t.Parallel()
	const host = "baton-test.invalid"
	var dnsErr *net.DNSError
	if _, err := net.DefaultResolver.LookupHost(context.Background(), host); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Skipf("this machine's resolver does not say that %s does not exist: %v", host, err)
	}
	base := "http://" + host + "/v1"
	p := newProbe(t, base, realKey, "m", nil)
	_, err := p.client.Complete(context.Background(), userRequest("go"))
	want := "llm: nothing answers at " + base + " (llm.base_url / OPENAI_BASE_URL): no such host " + host
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	if n, w := p.sent.Load(), p.waited(); n != 1 || len(w) != 0 {
		t.Errorf("%d requests and waits %v, want 1 request and no retry", n, w)
	}
}

// TestModelListedYet404: a 404 for a model the endpoint lists is not called
// a missing model.
func TestModelListedYet404(t *testing.T) {
	t.Parallel()
	base := endpoint(t, jsonError(404, "no route for this deployment"), modelList("a", "gpt-4o"))
	p := newProbe(t, base, realKey, "gpt-4o", nil)
	_, err := p.client.Complete(context.Background(), userRequest("go"))
	var le *llm.Error
	var se *llm.StatusError
	if errors.As(err, &le) || !errors.As(err, &se) || se.Error() != "404 Not Found: no route for this deployment" {
		t.Fatalf("err = %v, want the server's 404 as it is", err)
	}
}

// TestCredentialsNeverShown: the userinfo of the base URL and the key are
// in no error and no log line; scheme, host, port and path are.
func TestCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	srv := endpoint(t, jsonError(401, "bad key "+realKey+" for alice"), nil)
	host := strings.TrimPrefix(strings.TrimSuffix(srv, "/v1"), "http://")
	base := "http://alice:hunter2@" + host + "/v1"
	p := newProbe(t, base, realKey, "m", nil)
	_, err := p.client.Complete(context.Background(), userRequest("go"))
	want := "llm: the model endpoint at http://" + host + "/v1 refused the key (llm.api_key / OPENAI_API_KEY): 401 Unauthorized: bad key [redacted] for alice"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	for _, s := range []string{"hunter2", realKey, "alice:"} {
		if strings.Contains(p.logs.String(), s) {
			t.Errorf("the log shows %q:\n%s", s, p.logs.String())
		}
	}
}

// TestShortKeyKeepsHosts: with Ollama's key "ollama" and its compose host
// "ollama", the URL and the model name read as they are while the key
// said back is redacted.
func TestShortKeyKeepsHosts(t *testing.T) {
	t.Parallel()
	srv := endpoint(t,
		jsonError(404, `model "ollama/llama3" not found for key ollama, try pulling it first`),
		modelList("llama3:8b", "ollama/llama3:8b"))
	addr := strings.TrimPrefix(strings.TrimSuffix(srv, "/v1"), "http://")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr) // "ollama:11434" is the test server
	}
	p := newProbe(t, "http://ollama:11434/v1", "ollama", "ollama/llama3", tr)
	_, err := p.client.Complete(context.Background(), userRequest("go"))
	want := "llm: model ollama/llama3 not found at http://ollama:11434/v1 (models there: ollama/llama3:8b, llama3:8b)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	var se *llm.StatusError
	if !errors.As(err, &se) || se.Message != `model "ollama/llama3" not found for key [redacted], try pulling it first` {
		t.Errorf("server's message = %q", se.Message)
	}
	if !strings.Contains(p.logs.String(), "url=http://ollama:11434/v1") {
		t.Errorf("the log does not show the URL as it is:\n%s", p.logs.String())
	}
}

// TestRetriedFailures: 429, 5xx are retried, each retry one log line
// saying which failure and when the next try is; 400 is not.
func TestRetriedFailures(t *testing.T) {
	t.Parallel()
	t.Run("429 then success", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int32
		base := endpoint(t, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				w.Header().Set("Retry-After", "2")
				jsonError(429, "Rate limit reached for requests")(w, r)
				return
			}
			answer(200, "application/json", okReply)(w, r)
		}, nil)
		p := newProbe(t, base, realKey, "m", nil)
		resp, err := p.client.Complete(context.Background(), userRequest("go"))
		if err != nil || resp.Message.Content != "ok" {
			t.Fatalf("Complete = %q, %v; want ok", resp.Message.Content, err)
		}
		if diff := cmp.Diff([]time.Duration{2 * time.Second}, p.waited()); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
		if got := p.sent.Load(); got != 2 {
			t.Errorf("%d requests, want 2", got)
		}
		lines := p.logLines("retry ")
		if len(lines) != 1 || !strings.Contains(lines[0], `msg="llm: 429 Too Many Requests; retry 1 of 3 in 2s"`) {
			t.Errorf("retry lines = %q, want one naming 429 and the 2s wait", lines)
		}
	})
	t.Run("500 until the retries run out", func(t *testing.T) {
		t.Parallel()
		base := endpoint(t, jsonError(500, "The server had an error while processing your request."), nil)
		p := newProbe(t, base, realKey, "m", nil)
		_, err := p.client.Complete(context.Background(), userRequest("go"))
		want := "the language model kept failing: 500 Internal Server Error after 3 retries"
		var le *llm.Error
		if !errors.Is(err, llm.ErrUnavailable) || !errors.As(err, &le) || le.Kind != llm.KindUnavailable || err.Error() != want {
			t.Fatalf("err = %v, want %q", err, want)
		}
		if le.URL != base || le.Retries != 3 || le.Reason != "500 Internal Server Error" {
			t.Errorf("error = %+v", le)
		}
		if got := p.sent.Load(); got != 4 {
			t.Errorf("%d requests, want 4", got)
		}
		lines := p.logLines("retry ")
		if len(lines) != 3 {
			t.Fatalf("%d retry lines, want 3:\n%s", len(lines), p.logs.String())
		}
		for i, l := range lines {
			if !strings.Contains(l, fmt.Sprintf(`msg="llm: 500 Internal Server Error; retry %d of 3 in `, i+1)) {
				t.Errorf("retry line %d = %s", i+1, l)
			}
		}
		if gave := p.logLines("giving up"); len(gave) != 1 {
			t.Errorf("%d give-up lines, want 1", len(gave))
		}
	})
	t.Run("400 is not retried", func(t *testing.T) {
		t.Parallel()
		base := endpoint(t, jsonError(400, "Invalid schema for function 'Bash'"), nil)
		p := newProbe(t, base, realKey, "m", nil)
		_, err := p.client.Complete(context.Background(), userRequest("go"))
		var le *llm.Error
		var se *llm.StatusError
		if errors.As(err, &le) || !errors.As(err, &se) || err.Error() != "llm: 400 Bad Request: Invalid schema for function 'Bash'" {
			t.Fatalf("err = %v, want the 400 as it is", err)
		}
		if n, w := p.sent.Load(), p.waited(); n != 1 || len(w) != 0 {
			t.Errorf("%d requests, waits %v; want 1 and none", n, w)
		}
	})
}

func TestNeedsKey(t *testing.T) {
	for base, want := range map[string]bool{
		"https://api.openai.com/v1":     true,
		"https://API.OpenAI.com:443/v1": true,
		"http://localhost:11434/v1":     false,
		"https://openrouter.ai/api/v1":  false,
		"http://api.openai.com.evil/v1": false,
		"::not a url":                   false,
	} {
		if got := llm.NeedsKey(base); got != want {
			t.Errorf("NeedsKey(%q) = %v, want %v", base, got, want)
		}
	}
}
