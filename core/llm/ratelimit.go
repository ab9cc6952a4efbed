package llm

import (
	"strings"
	"unicode/utf8"
)

// rateLimitPhrases are what providers and proxies say, in lower case, when
// they return a rate-limit or quota error as if it were the assistant's text.
var rateLimitPhrases = []string{
	"rate limit reached",
	"rate limit exceeded",
	"rate_limit_exceeded",
	"rate limit has been reached",
	"you exceeded your current quota",
	"exceeded your current quota",
	"insufficient_quota",
	"quota exceeded",
	"too many requests",
	"resource has been exhausted",
	"resource_exhausted",
	"レート制限",
	"レートリミット",
	"利用上限に達",
	"クォータを超",
	"クォータの上限",
	"リクエストが多すぎ",
	"リクエスト数の上限",
}

// rateLimitMaxRunes bounds the replies taken for rate-limit messages: such
// messages are short, and a long reply that mentions rate limits is far more
// likely a real answer about them.
const rateLimitMaxRunes = 400

// rateLimitText reports whether an assistant reply without tool calls is in
// fact a provider's rate-limit or quota message.
func rateLimitText(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || utf8.RuneCountInString(s) > rateLimitMaxRunes {
		return false
	}
	s = strings.ToLower(s)
	for _, p := range rateLimitPhrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
