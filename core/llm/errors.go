package llm

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind says what went wrong with a request to the model, in terms of what
// a person can change.
type Kind int

const (
	// KindNoKey: llm.api_key is empty and the endpoint needs one — known
	// before any request for OpenAI's own endpoint (NeedsKey), else learnt
	// from a 401 or 403.
	KindNoKey Kind = iota + 1
	// KindKeyRefused: the endpoint answered 401 or 403 to the key sent.
	KindKeyRefused
	// KindModelNotFound: the endpoint answered 404: the model does not
	// exist there (or the base URL is not the API's root).
	KindModelNotFound
	// KindUnreachable: nothing answers at the base URL: the connection
	// was refused, the host name does not resolve, no route to it.
	KindUnreachable
	// KindNotAPI: the endpoint answered HTML (a proxy's login page, a web
	// site) instead of an OpenAI-compatible API.
	KindNotAPI
	// KindUnavailable: the endpoint kept failing with retryable errors
	// (429, 5xx, timeouts, broken connections) until the retry limit. The
	// error wraps ErrUnavailable.
	KindUnavailable
)

// Error is a request to the model that failed in a way Baton can explain.
// Complete returns it wrapped with "llm: ", except for KindUnavailable,
// which it returns as it is (its message starts with ErrUnavailable's
// sentence). Its message
// is one plain sentence fit to show a person, naming the configuration
// key to change; the fields let a caller say the same in its own words.
// Nothing in it carries the API key or URL credentials.
type Error struct {
	Kind Kind
	// URL is the endpoint's base URL as shown to people: without userinfo,
	// query or fragment.
	URL string
	// Model is the model the request named.
	Model string
	// Models are, for KindModelNotFound, the first models the endpoint
	// lists (those whose names contain Model, or are contained in it,
	// first), cut to one short line; MoreModels counts those left out.
	// Listed reports whether GET {base}/models answered at all.
	Models     []string
	MoreModels int
	Listed     bool
	// Reason is the last failure in plain words: "503 Service
	// Unavailable", "connection refused", "401 Unauthorized: …".
	Reason string
	// Retries is how many retries were made (KindUnavailable).
	Retries int
	// Err is the detail: a *StatusError when the server answered.
	Err error
}

func (e *Error) Error() string {
	switch e.Kind {
	case KindNoKey:
		return fmt.Sprintf("llm.api_key is empty (set OPENAI_API_KEY): the model endpoint at %s needs an API key", e.URL)
	case KindKeyRefused:
		return fmt.Sprintf("the model endpoint at %s refused the key (llm.api_key / OPENAI_API_KEY): %s", e.URL, e.Reason)
	case KindModelNotFound:
		switch {
		case !e.Listed:
			return fmt.Sprintf("model %s not found at %s, which lists no models at /models either: check llm.base_url / OPENAI_BASE_URL", e.Model, e.URL)
		case len(e.Models) == 0:
			return fmt.Sprintf("model %s not found at %s, which lists no models", e.Model, e.URL)
		}
		list := strings.Join(e.Models, ", ")
		if e.MoreModels > 0 {
			list = fmt.Sprintf("%s and %d more", list, e.MoreModels)
		}
		return fmt.Sprintf("model %s not found at %s (models there: %s)", e.Model, e.URL, list)
	case KindUnreachable:
		return fmt.Sprintf("nothing answers at %s (llm.base_url / OPENAI_BASE_URL): %s", e.URL, e.Reason)
	case KindNotAPI:
		return fmt.Sprintf("the endpoint at %s answered HTML, not an OpenAI-compatible API (llm.base_url / OPENAI_BASE_URL)", e.URL)
	case KindUnavailable:
		unit := "retries"
		if e.Retries == 1 {
			unit = "retry"
		}
		return fmt.Sprintf("%s: %s after %d %s", ErrUnavailable, e.Reason, e.Retries, unit)
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return "the language model failed"
}

func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind == KindUnavailable {
		errs = append(errs, ErrUnavailable)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// NeedsKey reports whether the endpoint at baseURL is known to refuse
// requests without an API key, so that an empty key is a configuration
// mistake caught before any request. Only OpenAI's own API
// (api.openai.com) is: local servers (Ollama, llama.cpp, vLLM without
// --api-key) take an empty key, and any other endpoint that wants one
// says so with a 401, reported as KindNoKey.
func NeedsKey(baseURL string) bool {
	u, err := url.Parse(baseURL)
	return err == nil && strings.EqualFold(strings.TrimSuffix(u.Hostname(), "."), "api.openai.com")
}

// shownURL is baseURL as errors show it: scheme, host, port and path,
// without userinfo, query or fragment (where proxies put credentials).
func shownURL(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = nil, "", false, "", ""
	return strings.TrimSuffix(v.String(), "/")
}

// Limits of the model list in a KindModelNotFound message: a server may
// list thousands, and the message must stay one short line.
const (
	listedMax      = 10  // names shown at most
	listedMaxBytes = 240 // bytes of names shown at most (the first always is)
	listedNameMax  = 60  // bytes of one name shown at most
)

// cutModels picks the names shown for a model that was not found: names
// like the one asked for first (containing it, or contained in it, case
// aside), then the others, each group in the server's order; at most
// listedMax names and listedMaxBytes bytes. It returns them and how many
// were left out.
func cutModels(asked string, ids []string, redact func(string) string) ([]string, int) {
	var like, other []string
	a := strings.ToLower(asked)
	for _, id := range ids {
		id = printable(id)
		if id == "" {
			continue
		}
		l := strings.ToLower(id)
		if a != "" && (strings.Contains(l, a) || strings.Contains(a, l)) {
			like = append(like, id)
		} else {
			other = append(other, id)
		}
	}
	all := append(like, other...)
	var shown []string
	size := 0
	for _, id := range all {
		id = clip(redact(id), listedNameMax)
		if len(shown) == listedMax || (len(shown) > 0 && size+len(id) > listedMaxBytes) {
			break
		}
		shown = append(shown, id)
		size += len(id) + 2
	}
	return shown, len(all) - len(shown)
}

// printable drops control characters and spaces from a server's model
// name, so that it cannot break the line it is shown in.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}
