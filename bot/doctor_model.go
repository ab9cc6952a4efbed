package main

// baton doctor's checks of the model endpoint, and the model list that
// baton init offers.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/tokens"
)

// doctorTool is the one tool the tool-calling check offers the model.
const doctorTool = "doctor_check"

// endpointProblem says what went wrong asking the model endpoint for its
// model list.
type endpointProblem int

const (
	endpointUnreachable endpointProblem = iota + 1 // nothing answers at the URL
	endpointKeyRefused                             // 401 or 403
	endpointHTML                                   // an HTML page (a proxy's login, a web site)
	endpointNoList                                 // the endpoint has no model list (404, 405, 501, not a list)
	endpointFailed                                 // another error status
)

// providerWait bounds the GET {base_url}/models that llm.provider: auto
// makes at start when the base URL does not name the provider.
const providerWait = 3 * time.Second

// modelProvider is the provider llm.provider stands for at c.BaseURL
// (llm.Detect, asking the endpoint's model list for at most providerWait
// with hc, nil for the default client), and how it was found; the choice
// is logged. "" is none known: the client takes OpenAI's conventions.
func modelProvider(ctx context.Context, c LLMConfig, hc *http.Client, log *slog.Logger) (provider, how string) {
	pctx, cancel := context.WithTimeout(ctx, providerWait)
	defer cancel()
	provider, how = llm.Detect(pctx, hc, c.Provider, c.BaseURL, c.APIKey.Reveal())
	if log != nil && how != llm.FoundByConfig {
		log.Info("model provider", "provider", cmp.Or(provider, "openai-compatible"), "found_by", how)
	}
	return provider, how
}

// providerCheck says which provider's conventions Baton speaks to the
// endpoint with, and how it chose them.
func providerCheck(p llm.Profile, how string) check {
	if how == llm.FoundNone {
		return passed("llm.provider", "auto: the endpoint is none Baton knows by its URL or model list; OpenAI's conventions (set llm.provider to name it)")
	}
	return passed("llm.provider", fmt.Sprintf("%s (from %s)", p.Title, how))
}

// endpointError is a failed GET {base_url}/models.
type endpointError struct {
	problem endpointProblem
	reason  string // plain words: "connection refused", "503 Service Unavailable"
}

func (e *endpointError) Error() string { return e.reason }

// models is the model list of an endpoint.
type models struct {
	IDs []string
	// Context is each model's context window in tokens, where the
	// endpoint reports one.
	Context map[string]int
}

// find returns the listed id of model: itself, or the name Ollama lists
// it under (llama3.1 is llama3.1:latest).
func (l models) find(model string) (string, bool) {
	for _, id := range []string{model, model + ":latest"} {
		if slices.Contains(l.IDs, id) {
			return id, true
		}
	}
	return "", false
}

// listModels asks GET {baseURL}/models with the key, as OpenAI documents
// it. Errors are *endpointError; none quotes the answer's body.
func listModels(ctx context.Context, hc *http.Client, baseURL string, key Secret) (models, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/models", nil)
	if err != nil {
		return models{}, &endpointError{problem: endpointUnreachable, reason: "not a URL"}
	}
	if k := key.Reveal(); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return models{}, &endpointError{problem: endpointUnreachable, reason: netReason(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return models{}, &endpointError{problem: endpointFailed, reason: "the answer could not be read: " + netReason(err)}
	}
	status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return models{}, &endpointError{problem: endpointKeyRefused, reason: status}
	case looksHTML(resp.Header.Get("Content-Type"), body):
		return models{}, &endpointError{problem: endpointHTML, reason: status + " with an HTML page"}
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		return models{}, &endpointError{problem: endpointNoList, reason: status}
	case resp.StatusCode != http.StatusOK:
		return models{}, &endpointError{problem: endpointFailed, reason: status}
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Data == nil {
		return models{}, &endpointError{problem: endpointNoList, reason: "the answer is not a model list"}
	}
	out := models{Context: map[string]int{}}
	for _, m := range list.Data {
		id, _ := m["id"].(string)
		if id == "" {
			continue
		}
		out.IDs = append(out.IDs, id)
		// Where servers put a model's context window: OpenRouter, vLLM,
		// and others.
		for _, k := range []string{"context_length", "max_model_len", "context_window", "max_context_length"} {
			if n, ok := m[k].(float64); ok && n > 0 {
				out.Context[id] = int(n)
				break
			}
		}
	}
	return out, nil
}

// looksHTML reports whether an answer is a web page rather than JSON.
func looksHTML(contentType string, body []byte) bool {
	if strings.HasPrefix(strings.ToLower(contentType), "text/html") {
		return true
	}
	start := strings.ToLower(strings.TrimSpace(string(body[:min(len(body), 64)])))
	return strings.HasPrefix(start, "<!doctype html") || strings.HasPrefix(start, "<html")
}

// netReason is the innermost words of a failed request: "connection
// refused", "no such host", never the URL (which the check names itself).
func netReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return msg
}

// cutList shows names, the first n of them and how many more there are.
func cutList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// keyFix says what to change for a key the endpoint refused (or needs).
func keyProblem(key Secret, at, reason string) (detail, fix string) {
	if key == "" {
		return fmt.Sprintf("the model endpoint at %s needs an API key (%s) and llm.api_key is empty", at, reason), "set OPENAI_API_KEY (or llm.api_key) to a key for this endpoint"
	}
	return fmt.Sprintf("the model endpoint at %s refused the key (llm.api_key / OPENAI_API_KEY): %s", at, reason), "set OPENAI_API_KEY (or llm.api_key) to a valid key for this endpoint"
}

// model checks the endpoint: that it answers (its model list, or else a
// 1-token completion), that the model exists, that tool calling works (one
// tool offered with an instruction to call it: core/llm offers "auto" and
// "none" only), and that llm.context_window is not larger than the
// endpoint reports.
func (d *doctor) model(ctx context.Context) []check {
	c := d.cfg.LLM
	at, model := shownURL(c.BaseURL), c.Model
	urlFix := "start the model server, or set llm.base_url (OPENAI_BASE_URL) to where it listens"
	if c.APIKey == "" && strings.EqualFold(hostOf(c.BaseURL), "api.openai.com") {
		return []check{failure("llm.endpoint", "llm.api_key is empty, and OpenAI's API needs a key", "set OPENAI_API_KEY (or llm.api_key); for a local model set OPENAI_BASE_URL")}
	}
	provider, how := modelProvider(ctx, c, d.hc, d.log)
	client, err := llm.New(llm.Config{BaseURL: c.BaseURL, APIKey: c.APIKey.Reveal(), Model: model, Timeout: doctorTimeout, HTTPClient: d.hc, Logger: d.log,
		Stream: c.Stream, Provider: provider, ReasoningEffort: c.ReasoningEffort, NumCtx: c.ContextWindow})
	if err != nil {
		return []check{failure("llm.endpoint", fmt.Sprintf("llm.base_url %s is not an http(s) URL", at), "set llm.base_url (OPENAI_BASE_URL) to the API's root, such as http://localhost:11434/v1")}
	}
	lctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	list, err := listModels(lctx, d.hc, c.BaseURL, c.APIKey)
	cancel()
	var out []check
	var ee *endpointError
	if err == nil && len(list.IDs) == 0 {
		// An empty list (some proxies answer one) says nothing: ask the
		// model itself.
		err = &endpointError{problem: endpointNoList, reason: "an empty model list"}
	}
	switch {
	case err == nil:
		out = append(out, passed("llm.endpoint", fmt.Sprintf("%s answers and lists %s", at, plural(len(list.IDs), "model", "models"))))
		out = append(out, providerCheck(client.Profile(), how))
		if id, ok := list.find(model); ok {
			model = id // where the endpoint reports its window, it is under this name
		} else {
			there := "none"
			if len(list.IDs) > 0 {
				there = cutList(list.IDs, 20)
			}
			return append(out, failure("llm.model", fmt.Sprintf("model %s not found at %s (models there: %s)", model, at, there), "set llm.model (or BATON_LLM_MODEL) to one of them"))
		}
		out = append(out, passed("llm.model", fmt.Sprintf("%s is served there", c.Model)))
	case errors.As(err, &ee) && ee.problem == endpointNoList:
		// No model list: a 1-token completion says whether the endpoint
		// and the model answer.
		_, err := client.Complete(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Say OK."}}, MaxTokens: 1})
		if err != nil {
			return append(out, completionFailure("llm.endpoint", err, c.APIKey, at, model))
		}
		out = append(out, passed("llm.endpoint", fmt.Sprintf("%s answers (it lists no models at /models; a 1-token completion worked)", at)),
			providerCheck(client.Profile(), how),
			passed("llm.model", fmt.Sprintf("%s answered", model)))
	case errors.As(err, &ee) && ee.problem == endpointUnreachable:
		return []check{failure("llm.endpoint", fmt.Sprintf("nothing answers at %s (%s)", at, ee.reason), urlFix)}
	case errors.As(err, &ee) && ee.problem == endpointKeyRefused:
		detail, fix := keyProblem(c.APIKey, at, ee.reason)
		return []check{failure("llm.endpoint", detail, fix)}
	case errors.As(err, &ee) && ee.problem == endpointHTML:
		return []check{failure("llm.endpoint", fmt.Sprintf("the endpoint at %s answered HTML, not an OpenAI-compatible API (%s)", at, ee.reason),
			"set llm.base_url (OPENAI_BASE_URL) to the API's root (it usually ends in /v1), past any login page")}
	default:
		return []check{failure("llm.endpoint", fmt.Sprintf("the endpoint at %s answered GET /models with %v", at, err), "check the model server's log, or llm.base_url (OPENAI_BASE_URL)")}
	}
	out = append(out, d.tools(ctx, client, at, c.Model))
	if ch, ok := d.truncation(ctx, client, at); ok {
		out = append(out, ch)
	}
	window := c.ContextWindow
	if n, ok := list.Context[model]; ok {
		if window > n {
			out = append(out, failure("llm.context_window", fmt.Sprintf("llm.context_window is %d tokens, larger than the %d %s reports for %s: long jobs would overflow instead of being compacted", window, n, at, c.Model),
				fmt.Sprintf("set llm.context_window to %d or less", n)))
		} else {
			out = append(out, passed("llm.context_window", fmt.Sprintf("%d tokens, within the %d the endpoint reports", window, n)))
		}
	} else {
		out = append(out, skipped("llm.context_window", fmt.Sprintf("%d tokens; the endpoint does not report %s's context window, so it is not checked", window, c.Model)))
	}
	return out
}

// tools asks the model to call the one tool it is offered.
func (d *doctor) tools(ctx context.Context, client *llm.Client, at, model string) check {
	const name = "llm.tools"
	req := llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "This is a test of tool calling. Call the tool " + doctorTool + ` with {"ok": true}. Do not answer with text.`},
			{Role: llm.RoleUser, Content: "Call " + doctorTool + " now."},
		},
		Tools: []llm.ToolDef{{Name: doctorTool, Description: "Confirms that tool calling works.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)}},
		ToolChoice: llm.ToolChoiceRequired, // one forced call
		MaxTokens:  1024,                   // room for a reasoning model's thinking before its call
	}
	resp, err := client.Complete(ctx, req)
	var se *llm.StatusError
	if errors.As(err, &se) && se.StatusCode == http.StatusBadRequest {
		// A server that does not know "required" still shows whether its
		// model calls a tool when asked to.
		req.ToolChoice = llm.ToolChoiceAuto
		resp, err = client.Complete(ctx, req)
	}
	toolFix := "pick a model with tool (function) calling; vLLM needs --enable-auto-tool-choice and a --tool-call-parser, Ollama a model tagged tools"
	if detail, fix, ok := serverToolProblem(err, at); ok {
		return failure(name, detail, fix)
	}
	if err != nil {
		return completionFailure(name, err, d.cfg.LLM.APIKey, at, model)
	}
	for _, call := range resp.Message.ToolCalls {
		if call.Name == doctorTool {
			return passed(name, "tool calling works: the model called the tool it was offered")
		}
	}
	return failure(name, fmt.Sprintf("%s answered without calling the tool it was offered: Baton's agents work only through tool calls", model), toolFix)
}

// completionFailure describes a failed completion as a check named name.
func completionFailure(name string, err error, key Secret, at, model string) check {
	var se *llm.StatusError
	if errors.As(err, &se) {
		switch {
		case se.StatusCode == http.StatusUnauthorized || se.StatusCode == http.StatusForbidden:
			detail, fix := keyProblem(key, at, fmt.Sprintf("%d %s", se.StatusCode, http.StatusText(se.StatusCode)))
			return failure(name, detail, fix)
		case se.StatusCode == http.StatusNotFound:
			return failure(name, fmt.Sprintf("model %s not found at %s (404)", model, at),
				"set llm.model (BATON_LLM_MODEL) to a model the endpoint serves, and llm.base_url (OPENAI_BASE_URL) to the API's root (it usually ends in /v1)")
		}
	}
	return failure(name, fmt.Sprintf("a completion at %s failed: %s", at, clip(oneLine(err), 300)), "check the model server's log, llm.base_url (OPENAI_BASE_URL) and llm.model")
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.Hostname(), ".")
}

// serverToolProblem recognises, by the server's own words, a server that
// refuses tool calls because of how it was started: vLLM without a tool
// parser ("\"auto\" tool choice requires --enable-auto-tool-choice and
// --tool-call-parser to be set"), llama.cpp's server without --jinja
// ("tools param requires --jinja flag").
func serverToolProblem(err error, at string) (detail, fix string, ok bool) {
	var se *llm.StatusError
	if !errors.As(err, &se) {
		return "", "", false
	}
	msg := se.Message
	switch {
	case strings.Contains(msg, "--enable-auto-tool-choice") || strings.Contains(msg, "--tool-call-parser"):
		return fmt.Sprintf("the vLLM server at %s refuses tool calls: it was started without a tool parser (%s)", at, clip(oneLine(se), 200)),
			"start vLLM with --enable-auto-tool-choice --tool-call-parser NAME, the parser for the model (hermes for Qwen and Hermes models, llama3_json for Llama 3.x, mistral for Mistral)", true
	case strings.Contains(msg, "--jinja"):
		return fmt.Sprintf("llama.cpp's server at %s refuses tool calls: it was started without --jinja (%s)", at, clip(oneLine(se), 200)),
			"start llama-server with --jinja (and --chat-template-file with a template that supports tools if the model's own does not)", true
	}
	return "", "", false
}

// truncationProbe bounds the prompt of the truncation check, in tokens:
// above the few thousand Ollama keeps by default, within any window Baton
// accepts.
const truncationProbe = 8000

// truncation sends one long prompt (a 1-token completion) to a local
// Ollama — its profile (llm.provider ollama, or auto), or a base URL on
// Ollama's port 11434 —
// and compares the prompt tokens it reports with Baton's count: far
// fewer means the server cuts Baton's prompts to its num_ctx. ok is false
// when the check does not apply.
func (d *doctor) truncation(ctx context.Context, client *llm.Client, at string) (check, bool) {
	const name = "llm.num_ctx"
	c := d.cfg.LLM
	ollama := client.Profile().Name == "ollama" // llm.provider ollama, or auto on Ollama's port
	if u, err := url.Parse(c.BaseURL); !ollama && (err != nil || u.Port() != "11434") {
		return check{}, false
	}
	want := min(truncationProbe, (c.ContextWindow-c.MaxOutputTokens)*3/4)
	counter := tokens.ForModel(c.Model)
	var b strings.Builder
	b.WriteString("This is a test of the context size. Answer OK.\n")
	for i := 0; counter.Count(b.String()) < want; i++ {
		for range 50 {
			fmt.Fprintf(&b, "line %d: the quick brown fox jumps over the lazy dog\n", i)
			i++
		}
	}
	sent := counter.Count(b.String())
	resp, err := client.Complete(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: b.String()}}, MaxTokens: 1})
	switch {
	case err != nil:
		return skipped(name, fmt.Sprintf("a %d-token prompt failed, so truncation is not checked: %s", sent, clip(oneLine(err), 200))), true
	case !resp.Usage.Reported:
		return skipped(name, "the endpoint reports no usage, so truncation is not checked"), true
	case resp.Usage.PromptTokens*2 < sent:
		fix := fmt.Sprintf("raise Ollama's context to llm.context_window: OLLAMA_CONTEXT_LENGTH=%d in the server's environment, or PARAMETER num_ctx %d in the model's Modelfile; or set llm.provider: ollama (or auto), so that Baton sends options.num_ctx; or lower llm.context_window to what the server holds", c.ContextWindow, c.ContextWindow)
		if ollama {
			fix = fmt.Sprintf("Baton sent options.num_ctx %d, which this endpoint ignored: set OLLAMA_CONTEXT_LENGTH=%d in the server's environment, or PARAMETER num_ctx %d in the model's Modelfile; or lower llm.context_window to what the server holds", c.ContextWindow, c.ContextWindow, c.ContextWindow)
		}
		return failure(name, fmt.Sprintf("%s counted %d prompt tokens for a prompt of about %d: it cuts longer prompts to its num_ctx, and the model would not see the start of a job's conversation", at, resp.Usage.PromptTokens, sent), fix), true
	}
	return passed(name, fmt.Sprintf("a prompt of about %d tokens arrived whole (%d prompt tokens reported)", sent, resp.Usage.PromptTokens)), true
}
