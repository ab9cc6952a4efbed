package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// Complete sends req and returns the model's answer.
//
// Retryable failures — 429, 408 and 5xx answers, an attempt running past
// Config.Timeout, connection errors, unreadable replies, and a provider's
// rate-limit or quota message returned as the assistant's text — are
// retried up to Config.MaxRetries times, waiting as the server's Retry-After
// says or else with exponential backoff and jitter. When the retries run out
// the error wraps ErrUnavailable (and the last failure, a *StatusError when
// the server answered). Other server answers (400, 401, 403, 404, …) fail at
// once with an error wrapping a *StatusError. When ctx ends, the error wraps
// ctx.Err(). Errors never contain the API key.
func (c *Client) Complete(ctx context.Context, req Request) (Response, error) {
	wreq, err := c.wireRequest(req)
	if err != nil {
		return Response{}, fmt.Errorf("llm: %w", err)
	}
	body, err := encodeBody(req, wreq)
	if err != nil {
		return Response{}, fmt.Errorf("llm: %w", err)
	}
	known := toolNames(req.Tools)
	if req.ToolChoice == ToolChoiceNone {
		known = nil // the caller wants text: take none of it for calls
	}
	for retry := 0; ; retry++ {
		start := time.Now()
		resp, f := c.attempt(ctx, wreq, body, known)
		if f == nil {
			c.log.DebugContext(ctx, "llm: completion",
				"model", wreq.Model, "took", time.Since(start).Round(time.Millisecond),
				"finish", resp.FinishReason, "tool_calls", len(resp.Message.ToolCalls),
				"prompt_tokens", resp.Usage.PromptTokens, "completion_tokens", resp.Usage.CompletionTokens,
				"cached_tokens", resp.Usage.CachedTokens)
			return resp, nil
		}
		if err := ctx.Err(); err != nil {
			return Response{}, fmt.Errorf("llm: %w", err)
		}
		if !f.retry {
			c.log.WarnContext(ctx, "llm: request refused", "model", wreq.Model, "error", f.err.Error())
			return Response{}, fmt.Errorf("llm: %w", f.err)
		}
		if retry >= c.maxRetries {
			c.log.ErrorContext(ctx, "llm: giving up", "model", wreq.Model, "retries", retry,
				"reason", f.reason, "error", f.err.Error())
			return Response{}, &unavailableError{reason: f.reason, retries: retry, last: f.err}
		}
		wait := f.wait
		if wait <= 0 {
			wait = backoff(retry)
		}
		c.log.WarnContext(ctx, "llm: retrying", "model", wreq.Model, "retry", retry+1,
			"max_retries", c.maxRetries, "reason", f.reason, "wait", wait, "error", f.err.Error())
		if err := c.sleep(ctx, wait); err != nil {
			return Response{}, fmt.Errorf("llm: %w", err)
		}
	}
}

// failure is why one attempt did not produce an answer.
type failure struct {
	retry  bool
	reason string        // plain words for the give-up message
	wait   time.Duration // the server's Retry-After, 0 when none
	err    error         // the detail, API key removed
}

func (c *Client) attempt(ctx context.Context, wreq openai.ChatCompletionRequest, body []byte, known func(string) bool) (Response, *failure) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	x := &exchange{request: body}
	out, err := c.api.CreateChatCompletion(context.WithValue(actx, exchangeKey{}, x), wreq)
	if err != nil {
		return Response{}, c.classify(actx, x, err)
	}
	if len(out.Choices) == 0 {
		return Response{}, &failure{retry: true, reason: "an empty reply",
			err: errors.New("the reply has no choices")}
	}
	resp := fromWire(out, x.usageReported(out.Usage))
	msg := &resp.Message
	if len(msg.ToolCalls) == 0 && known != nil && msg.Content != "" {
		if calls, rest := ExtractToolCalls(msg.Content, known); len(calls) > 0 {
			msg.ToolCalls, msg.Content = calls, rest
		}
	}
	if len(msg.ToolCalls) == 0 && rateLimitText(msg.Content) {
		return Response{}, &failure{retry: true, reason: "a rate-limit message instead of an answer",
			err: fmt.Errorf("the model answered %q", clip(c.redact(msg.Content), 200))}
	}
	return resp, nil
}

// classify turns an error of one attempt into a failure. actx is the
// attempt's context.
func (c *Client) classify(actx context.Context, x *exchange, err error) *failure {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		se := &StatusError{StatusCode: apiErr.HTTPStatusCode, Message: clip(c.redact(apiErr.Message), 500)}
		if code, ok := apiErr.Code.(string); ok {
			se.Code = code
		}
		return c.statusFailure(se, x)
	case errors.As(err, &reqErr):
		se := &StatusError{StatusCode: reqErr.HTTPStatusCode,
			Message: clip(c.redact(strings.TrimSpace(string(reqErr.Body))), 300)}
		return c.statusFailure(se, x)
	case actx.Err() == context.DeadlineExceeded:
		return &failure{retry: true, reason: fmt.Sprintf("no answer within %s", c.timeout),
			err: fmt.Errorf("no answer within %s", c.timeout)}
	}
	msg := c.redact(err.Error())
	var netErr net.Error
	var urlErr *url.Error
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return &failure{retry: true, reason: "no answer in time", err: errors.New(msg)}
	case errors.As(err, &urlErr), errors.As(err, &netErr):
		return &failure{retry: true, reason: "the server could not be reached",
			err: errors.New(msg)}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.As(err, &syntaxErr):
		return &failure{retry: true, reason: "a reply that could not be read",
			err: fmt.Errorf("read reply: %s", msg)}
	}
	return &failure{err: errors.New(msg)}
}

func (c *Client) statusFailure(se *StatusError, x *exchange) *failure {
	f := &failure{retry: se.Retryable(), reason: statusText(se.StatusCode), err: se}
	if f.retry {
		f.wait = retryAfter(x.header, time.Now())
	}
	return f
}

// unavailableError is what Complete returns when the retries ran out.
type unavailableError struct {
	reason  string
	retries int
	last    error
}

func (e *unavailableError) Error() string {
	unit := "retries"
	if e.retries == 1 {
		unit = "retry"
	}
	return fmt.Sprintf("%s: %s after %d %s", ErrUnavailable, e.reason, e.retries, unit)
}

func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.last} }

// backoff is the wait before retry n+1 when the server named none:
// exponential from backoffBase, capped at backoffMax, with the upper half
// jittered so that workers hit by the same outage do not return in step.
func backoff(n int) time.Duration {
	d := backoffMax
	if n < 16 {
		d = min(backoffBase<<n, backoffMax)
	}
	return d/2 + rand.N(d/2+1)
}

// retryAfter reads how long the server asked to wait: OpenAI's
// retry-after-ms, else Retry-After in seconds or as an HTTP date. It
// returns 0 when the header is absent or unusable, and caps the wait at
// retryAfterMax.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			d = time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); d == 0 && v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s > 0 {
				d = time.Duration(s * float64(time.Second))
			}
		} else if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	}
	if d <= 0 {
		return 0
	}
	return min(d, retryAfterMax)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// redactor returns a function that removes key from a text.
func redactor(key string) func(string) string {
	if key == "" {
		return func(s string) string { return s }
	}
	return func(s string) string { return strings.ReplaceAll(s, key, "[redacted]") }
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// exchangeKey is the context key under which an attempt hands its
// *exchange to the recorder.
type exchangeKey struct{}

// exchange keeps what go-openai drops about one attempt's reply: the
// headers of an error answer (for Retry-After) and whether the body carried
// a usage object at all. It is used by one goroutine: go-openai reads the
// reply within the call that sent the request.
type exchange struct {
	request   []byte // the body to send in place of go-openai's (body.go)
	header    http.Header
	body      bytes.Buffer // the reply's first bodyKeep bytes
	truncated bool
}

// bodyKeep bounds the copy of a reply kept to look for usage.
const bodyKeep = 4 << 20

// usageReported reports whether the reply carried a usage object. When the
// body was too large to keep, any non-zero count counts as reported.
func (x *exchange) usageReported(u openai.Usage) bool {
	if x.truncated || x.body.Len() == 0 {
		return u.PromptTokens > 0 || u.CompletionTokens > 0 || u.TotalTokens > 0
	}
	var probe struct {
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(x.body.Bytes(), &probe); err != nil {
		return false
	}
	return len(probe.Usage) > 0 && string(probe.Usage) != "null"
}

// recorder is the HTTP doer go-openai sends through; it fills the attempt's
// exchange, if any, from the reply.
type recorder struct{ hc *http.Client }

func (r recorder) Do(req *http.Request) (*http.Response, error) {
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if x != nil && x.request != nil {
		body := x.request
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return resp, err
	}
	if x != nil {
		x.header = resp.Header
		resp.Body = &teeBody{ReadCloser: resp.Body, x: x}
	}
	return resp, nil
}

// teeBody copies what is read from a reply body into its exchange.
type teeBody struct {
	io.ReadCloser
	x *exchange
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 && !t.x.truncated {
		if t.x.body.Len()+n > bodyKeep {
			t.x.truncated = true
			t.x.body.Reset()
		} else {
			t.x.body.Write(p[:n])
		}
	}
	return n, err
}
