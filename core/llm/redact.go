package llm

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redaction by value.
//
// Errors and replies from a server may echo the API key, and the key may
// be short: Ollama's documented key is "ollama", a local server's may be
// "x". Replacing every substring equal to the key would turn
// "http://ollama:11434" into "http://[redacted]:11434" and "exist" into
// "e[redacted]ist", so the rule depends on the secret's length:
//
//   - A secret of longSecret (8) characters or more is redacted wherever it
//     occurs, inside other text too: "Bearer sk-proj-…", a JSON value, a
//     URL path.
//   - A shorter secret is redacted only where it stands alone as a whole
//     value: not preceded by a word character (a letter, a digit or '_')
//     nor by one of - . / + ~ @, and not followed by a word character nor
//     by one of - / + ~ @ = : (a '.' after it counts only when a word
//     character follows the '.', so that a sentence's full stop ends the
//     value). So with the key "ollama": "Authorization: Bearer ollama",
//     "api_key=ollama", `{"key":"ollama"}` and "the key ollama." are
//     redacted; "http://ollama:11434" (a host), "ollama.local",
//     "ollama/llama3" (a model name), "ollama-2" and "ollama=1" (a name, not
//     a value) stay as they are. A separator before the value ('=', ':',
//     a space, a quote) makes it a value; the same separator after it
//     makes it a name.
//   - In URLs (scheme://userinfo@host), the userinfo's password is always
//     redacted, whether or not it is a known secret, and so is a user name
//     equal to a secret; scheme, host and port stay.
//
// Matching is exact (case-sensitive). Every redacted span shows as
// "[redacted]".

// redactedText replaces what is redacted.
const redactedText = "[redacted]"

// longSecret is the length, in characters, from which a secret is redacted
// inside other text as well.
const longSecret = 8

// userinfo finds the userinfo of URLs: the scheme (group 1) and the
// userinfo before '@' (group 2).
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)([^\s/?#@"'<>\[\]]+)@`)

// redactor removes secrets from text by value. It is immutable and safe
// for concurrent use.
type redactor struct {
	secrets []string // non-empty, distinct
}

// newRedactor returns a redactor of secrets; empty ones are ignored.
func newRedactor(secrets ...string) *redactor {
	r := &redactor{}
	for _, s := range secrets {
		if strings.TrimSpace(s) != "" && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// redact returns s with the secrets and URL passwords replaced by
// "[redacted]" as the package's rule says.
func (r *redactor) redact(s string) string {
	var spans [][2]int
	for _, m := range userinfo.FindAllStringSubmatchIndex(s, -1) {
		start, end := m[4], m[5]
		user, pass, hasPass := strings.Cut(s[start:end], ":")
		if hasPass && pass != "" {
			spans = append(spans, [2]int{start + len(user) + 1, end})
		}
		if slices.Contains(r.secrets, user) {
			spans = append(spans, [2]int{start, start + len(user)})
		}
	}
	for _, secret := range r.secrets {
		long := utf8.RuneCountInString(secret) >= longSecret
		for from := 0; from < len(s); {
			i := strings.Index(s[from:], secret)
			if i < 0 {
				break
			}
			i += from
			j := i + len(secret)
			if long || standsAlone(s, i, j) {
				spans = append(spans, [2]int{i, j})
			}
			_, size := utf8.DecodeRuneInString(s[i:])
			from = i + size
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for k := 0; k < len(spans); {
		start, end := spans[k][0], spans[k][1]
		for k++; k < len(spans) && spans[k][0] <= end; k++ {
			end = max(end, spans[k][1])
		}
		b.WriteString(s[at:start])
		b.WriteString(redactedText)
		at = end
	}
	b.WriteString(s[at:])
	return b.String()
}

// standsAlone reports whether s[i:j] is a whole value (see the package's
// rule for short secrets).
func standsAlone(s string, i, j int) bool {
	if i > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		if wordRune(r) || strings.ContainsRune("-./+~@", r) {
			return false
		}
	}
	if j < len(s) {
		r, size := utf8.DecodeRuneInString(s[j:])
		if wordRune(r) || strings.ContainsRune("-/+~@=:", r) {
			return false
		}
		if r == '.' && j+size < len(s) {
			if next, _ := utf8.DecodeRuneInString(s[j+size:]); wordRune(next) {
				return false
			}
		}
	}
	return true
}

func wordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}
