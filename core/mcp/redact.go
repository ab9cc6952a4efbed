package mcp

import (
	"slices"
	"strings"
)

// redacted stands for a secret in what the server says.
const redacted = "[redacted]"

// minSecret is the shortest secret redacted: a shorter value (a flag, a
// port) would blot out ordinary words.
const minSecret = 4

// redactor removes a server's secrets from text by value, longest first so
// that a secret inside another is not half shown. It is immutable.
type redactor struct {
	r *strings.Replacer // nil: nothing to redact
}

func newRedactor(secrets []string) *redactor {
	var keep []string
	for _, s := range secrets {
		if len(s) >= minSecret && !slices.Contains(keep, s) {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		return &redactor{}
	}
	slices.SortFunc(keep, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, s := range keep {
		pairs = append(pairs, s, redacted)
	}
	return &redactor{r: strings.NewReplacer(pairs...)}
}

func (r *redactor) redact(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}
