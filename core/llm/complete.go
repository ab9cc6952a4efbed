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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// Complete sends req and returns the model's answer.
//
// Retryable failures — 429, 408 and 5xx answers, an attempt running past
// Config.Timeout, a connection that broke before the reply, unreadable
// replies, and a provider's rate-limit or quota message returned as the
// assistant's text — are retried up to Config.MaxRetries times, waiting as
// the server's Retry-After says or else with exponential backoff and
// jitter; each retry is logged as one line naming the failure and the wait.
// When the retries run out the error is an *Error of KindUnavailable,
// wrapping ErrUnavailable and the last failure (a *StatusError when the
// server answered).
//
// Other failures are not retried. Those a person can fix come as an *Error
// whose message says what to change: no key where one is needed (found
// before any request for OpenAI's endpoint, see NeedsKey), a refused key
// (401, 403), a model not found (404, with the models GET {base}/models
// lists), nothing answering at the base URL (connection refused, unknown
// host), an HTML answer where the API should be. The rest (400, 413, 422,
// TLS errors, …) wrap a *StatusError or the transport's error. When ctx
// ends, the error wraps ctx.Err(). Errors never contain the API key.
func (c *Client) Complete(ctx context.Context, req Request) (Response, error) {
	wreq, err := c.wireRequest(req)
	if err != nil {
		return Response{}, fmt.Errorf("llm: %w", err)
	}
	body, err := encodeBody(&c.encoded, req, wreq, c.bodyOptions())
	if err != nil {
		return Response{}, fmt.Errorf("llm: %w", err)
	}
	if c.keyMissing {
		err := &Error{Kind: KindNoKey, URL: c.url, Model: wreq.Model}
		c.log.WarnContext(ctx, "llm: request not sent", "model", wreq.Model, "url", c.url, "error", err.Error())
		return Response{}, fmt.Errorf("llm: %w", err)
	}
	known := toolNames(req.Tools)
	if req.ToolChoice == ToolChoiceNone {
		known = nil // the caller wants text: take none of it for calls
	}
	// texted is whether an attempt passed text to req.OnText: the next
	// attempt tells req.OnRestart first.
	texted := false
	onText := req.OnText
	if onText != nil {
		onText = func(delta string) { texted = true; req.OnText(delta) }
	}
	for retry := 0; ; retry++ {
		if texted && req.OnRestart != nil {
			req.OnRestart()
		}
		texted = false
		start := time.Now()
		var resp Response
		var f *failure
		if c.stream {
			resp, f = c.streamAttempt(ctx, body, onText)
		} else {
			resp, f = c.attempt(ctx, wreq, body)
		}
		if f == nil {
			f = c.settle(&resp, known, req.Messages)
		}
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
		if !f.retry && c.learnParam(wreq.Model, wreq, f.err) {
			// The endpoint named the token limit's parameter it wants:
			// sent again with it, not counted as a retry.
			c.log.InfoContext(ctx, "llm: the endpoint wants the other token-limit parameter; sending again",
				"model", wreq.Model, "error", f.err.Error())
			if wreq, err = c.wireRequest(req); err == nil {
				body, err = encodeBody(&c.encoded, req, wreq, c.bodyOptions())
			}
			if err != nil {
				return Response{}, fmt.Errorf("llm: %w", err)
			}
			retry--
			continue
		}
		if !f.retry {
			err := c.explain(ctx, wreq.Model, f)
			c.log.WarnContext(ctx, "llm: request failed", "model", wreq.Model, "url", c.url, "error", err.Error())
			return Response{}, fmt.Errorf("llm: %w", err)
		}
		if retry >= c.maxRetries {
			err := &Error{Kind: KindUnavailable, URL: c.url, Model: wreq.Model, Reason: f.reason, Retries: retry, Err: f.err}
			c.log.ErrorContext(ctx, "llm: giving up", "model", wreq.Model, "url", c.url, "retries", retry,
				"reason", f.reason, "error", f.err.Error())
			return Response{}, err
		}
		wait := f.wait
		if wait <= 0 {
			wait = backoff(retry)
		}
		c.log.WarnContext(ctx,
			fmt.Sprintf("llm: %s; retry %d of %d in %s", f.reason, retry+1, c.maxRetries, roundWait(wait)),
			"model", wreq.Model, "url", c.url, "reason", f.reason, "retry", retry+1, "max_retries", c.maxRetries,
			"wait", wait, "error", f.err.Error())
		if err := c.sleep(ctx, wait); err != nil {
			return Response{}, fmt.Errorf("llm: %w", err)
		}
	}
}

// roundWait shortens a wait for people to read.
func roundWait(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// failure is why one attempt did not produce an answer.
type failure struct {
	retry  bool
	kind   Kind          // what a person can fix; 0 when nothing to say beyond err
	reason string        // plain words: the give-up message, Error.Reason
	wait   time.Duration // the server's Retry-After, 0 when none
	err    error         // the detail, API key removed
}

// explain returns the error for a failure that is not retried.
func (c *Client) explain(ctx context.Context, model string, f *failure) error {
	if f.kind == 0 {
		return f.err
	}
	e := &Error{Kind: f.kind, URL: c.url, Model: model, Reason: f.reason, Err: f.err}
	if f.kind == KindModelNotFound {
		ids, ok := c.listModels(ctx)
		if ok && slices.Contains(ids, model) {
			// The model is there: the 404 is about something else.
			return f.err
		}
		e.Listed = ok
		e.Models, e.MoreModels = cutModels(model, ids, c.redact)
	}
	return e
}

// listWait bounds the GET {base}/models made to explain a 404.
const listWait = 15 * time.Second

// listModels returns the ids the endpoint lists, and whether it answered.
func (c *Client) listModels(ctx context.Context) ([]string, bool) {
	lctx, cancel := context.WithTimeout(ctx, min(c.timeout, listWait))
	defer cancel()
	list, err := c.api.ListModels(lctx)
	if err != nil {
		c.log.DebugContext(ctx, "llm: the endpoint lists no models", "url", c.url, "error", c.redact(err.Error()))
		return nil, false
	}
	ids := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	return ids, true
}

func (c *Client) attempt(ctx context.Context, wreq openai.ChatCompletionRequest, body *Body) (Response, *failure) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	x := &exchange{request: body}
	out, err := c.api.CreateChatCompletion(context.WithValue(actx, exchangeKey{}, x), wreq)
	if err != nil {
		return Response{}, c.classify(actx, x, err)
	}
	if len(out.Choices) == 0 {
		if !x.truncated {
			if f := c.errorIn200(x.body.Bytes()); f != nil {
				return Response{}, f
			}
		}
		return Response{}, &failure{retry: true, reason: "an empty reply",
			err: errors.New("the reply has no choices")}
	}
	resp := fromWire(out, x.usageReported(out.Usage))
	if resp.Usage.Reported && resp.Usage.CachedTokens == 0 {
		resp.Usage.CachedTokens = x.cacheHits()
	}
	return resp, nil
}

// settle finishes a reply both paths decoded: tool calls written into the
// text are moved to ToolCalls, ids that repeat an earlier turn's (or each
// other) are replaced, and a rate-limit message sent as the answer is a
// retryable failure.
func (c *Client) settle(resp *Response, known func(string) bool, history []Message) *failure {
	msg := &resp.Message
	if len(msg.ToolCalls) == 0 && known != nil && msg.Content != "" {
		if calls, rest := ExtractToolCalls(msg.Content, known); len(calls) > 0 {
			msg.ToolCalls, msg.Content = calls, rest
			resp.TextCalls = len(calls)
		} else {
			resp.UnreadCall = LooksLikeToolCall(msg.Content)
		}
	}
	resp.RepairedCalls = repairArguments(msg.ToolCalls)
	if len(msg.ToolCalls) == 0 && rateLimitText(msg.Content) {
		return &failure{retry: true, reason: "a rate-limit message instead of an answer",
			err: fmt.Errorf("the model answered %q", clip(c.redact(msg.Content), 200))}
	}
	if c.profile.ShortCallIDs {
		for i := range msg.ToolCalls {
			msg.ToolCalls[i].ID = shortID(msg.ToolCalls[i].ID)
		}
	}
	freshIDs(msg.ToolCalls, history, c.profile.ShortCallIDs)
	return nil
}

// freshIDs replaces the ids of calls that repeat an id of an earlier
// message (some servers count from call_0 every turn) or of another call
// of the same reply: each tool result must answer one call only.
func freshIDs(calls []ToolCall, history []Message, short bool) {
	if len(calls) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, m := range history {
		for _, tc := range m.ToolCalls {
			seen[tc.ID] = true
		}
		if m.ToolCallID != "" {
			seen[m.ToolCallID] = true
		}
	}
	for i := range calls {
		id := calls[i].ID
		for n := 0; seen[id]; n++ {
			id = callID(fmt.Sprintf("%s|%d|%s|%s", calls[i].ID, n, calls[i].Name, calls[i].Arguments), i)
			if short {
				id = shortID(id)
			}
		}
		calls[i].ID = id
		seen[id] = true
	}
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
		return c.statusFailure(se, x, false)
	case errors.As(err, &reqErr):
		html := isHTML(x.header, reqErr.Body)
		msg := strings.TrimSpace(string(reqErr.Body))
		if html {
			msg = "an HTML page"
		}
		se := &StatusError{StatusCode: reqErr.HTTPStatusCode, Message: clip(c.redact(msg), 300)}
		return c.statusFailure(se, x, html)
	case actx.Err() == context.DeadlineExceeded:
		return &failure{retry: true, reason: fmt.Sprintf("no answer within %s", c.timeout),
			err: fmt.Errorf("no answer within %s", c.timeout)}
	}
	msg := c.redact(err.Error())
	var netErr net.Error
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return &failure{retry: true, reason: "no answer in time", err: errors.New(msg)}
	case errors.As(err, &dnsErr):
		reason := "the host name " + c.redact(dnsErr.Name) + " does not resolve"
		if dnsErr.IsNotFound {
			reason = "no such host " + c.redact(dnsErr.Name)
		}
		return &failure{kind: KindUnreachable, reason: reason, err: errors.New(msg)}
	case errors.As(err, &opErr) && opErr.Op == "dial":
		reason := c.redact(opErr.Err.Error())
		if errors.Is(err, syscall.ECONNREFUSED) {
			reason = "connection refused"
		}
		return &failure{kind: KindUnreachable, reason: reason, err: errors.New(msg)}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		// Something answered, then hung up: like a 502, worth another try.
		return &failure{retry: true, reason: "the connection closed before the reply",
			err: fmt.Errorf("read reply: %s", msg)}
	case errors.As(err, &syntaxErr) && isHTML(x.header, x.body.Bytes()):
		return &failure{kind: KindNotAPI, reason: "an HTML page", err: errors.New(msg)}
	case errors.As(err, &syntaxErr):
		return &failure{retry: true, reason: "a reply that could not be read",
			err: fmt.Errorf("read reply: %s", msg)}
	}
	return &failure{err: errors.New(msg)}
}

// statusFailure classifies an HTTP error answer; html reports that its
// body was an HTML page.
func (c *Client) statusFailure(se *StatusError, x *exchange, html bool) *failure {
	f := &failure{reason: statusText(se.StatusCode), err: se}
	switch code := se.StatusCode; {
	case startFlagMissing(se.Message):
		// Not transient: the server was started without what the request
		// needs, and says so; retrying only delays the answer.
	case se.Retryable():
		// A gateway's error page is still a gateway's transient error.
		f.retry, f.wait = true, retryAfter(x.header, time.Now())
		if f.wait == 0 && code == http.StatusTooManyRequests && slices.Contains(c.profile.RateLimitHeaders, "x-ratelimit-reset-requests") {
			f.wait = rateReset(x.header)
		}
	case html:
		f.kind = KindNotAPI
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		f.kind, f.reason = KindKeyRefused, se.Error()
		if c.noKey {
			f.kind = KindNoKey
		}
	case code == http.StatusNotFound:
		f.kind, f.reason = KindModelNotFound, se.Error()
	}
	return f
}

// isHTML reports whether a reply is an HTML page rather than JSON: by its
// Content-Type, else by its first non-blank byte.
func isHTML(h http.Header, body []byte) bool {
	if ct := strings.ToLower(h.Get("Content-Type")); strings.Contains(ct, "html") {
		return true
	}
	b := bytes.TrimLeft(body, " \t\r\n\ufeff")
	return len(b) > 0 && b[0] == '<'
}

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

// rateReset reads OpenAI's (and Groq's) x-ratelimit-reset-requests and
// x-ratelimit-reset-tokens, durations such as "1s", "6m0s" or "20ms": the
// reset of the limit whose x-ratelimit-remaining-* is 0, else the later
// one. It returns 0 when there are none, and caps the wait at
// retryAfterMax.
func rateReset(h http.Header) time.Duration {
	var exhausted, any time.Duration
	for _, kind := range []string{"requests", "tokens"} {
		d, err := time.ParseDuration(strings.TrimSpace(h.Get("X-Ratelimit-Reset-" + kind)))
		if err != nil || d <= 0 {
			continue
		}
		any = max(any, d)
		if strings.TrimSpace(h.Get("X-Ratelimit-Remaining-"+kind)) == "0" {
			exhausted = max(exhausted, d)
		}
	}
	if exhausted > 0 {
		any = exhausted
	}
	return min(any, retryAfterMax)
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
	request   *Body // the body to send in place of go-openai's (body.go)
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

// cacheHits returns the cached prompt tokens of a reply that reports them
// under DeepSeek's name (usage.prompt_cache_hit_tokens) rather than
// OpenAI's; 0 when it does not.
func (x *exchange) cacheHits() int {
	if x.truncated || x.body.Len() == 0 {
		return 0
	}
	var probe struct {
		Usage struct {
			Hits int `json:"prompt_cache_hit_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(x.body.Bytes(), &probe); err != nil {
		return 0
	}
	return max(probe.Usage.Hits, 0)
}

// recorder is the HTTP doer go-openai sends through; it fills the attempt's
// exchange, if any, from the reply.
type recorder struct {
	hc      *http.Client
	profile Profile
	apiKey  string
}

func (r recorder) Do(req *http.Request) (*http.Response, error) {
	r.profile.decorate(req, r.apiKey)
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if x != nil && x.request != nil {
		x.request.into(req)
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

// repairArguments repairs, in place, the arguments of calls that are not
// valid JSON where RepairJSON can, and returns how many it repaired.
func repairArguments(calls []ToolCall) int {
	n := 0
	for i, c := range calls {
		if strings.TrimSpace(c.Arguments) == "" || json.Valid([]byte(c.Arguments)) {
			continue
		}
		if fixed, ok := RepairJSON(c.Arguments); ok {
			calls[i].Arguments = fixed
			n++
		}
	}
	return n
}

// startFlagMissing reports whether a server's error says it was started
// without a flag the request needs: llama.cpp's server without --jinja
// answers tools with a 500 "tools param requires --jinja flag".
func startFlagMissing(msg string) bool {
	return strings.Contains(msg, "requires --jinja")
}
