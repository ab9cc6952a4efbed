package llmtest

import (
	"bytes"
	"encoding/json"
)

// The prompt cache the server models, as OpenAI documents its own: a
// request whose prompt begins with the prompt of an earlier request is
// served that common prefix from the cache, counted in steps of
// cacheStep tokens and only from cacheMin tokens on, and reports it as
// usage.prompt_tokens_details.cached_tokens. The prompt, for the cache,
// is the tools followed by the messages, each exactly as encoded in the
// request body: one changed byte (a timestamp, a counter, a reordered
// tool, a masked result) ends the prefix there. Tokens are the scripted
// usage's prompt tokens, spread evenly over the prompt's bytes.
const (
	cacheMin     = 1024
	cacheStep    = 128
	cacheEntries = 32 // earlier prompts kept, newest first
)

// CacheStats are the prompt cache's figures over the requests it saw
// (those whose step reported usage).
type CacheStats struct {
	// PromptTokens is the prompt tokens reported.
	PromptTokens int
	// CachedTokens is the part of them served from the cache.
	CachedTokens int
	// NewTokens is the part in messages (or tools) that no earlier
	// request held, byte for byte, anywhere: what no cache could have
	// served. 1 − NewTokens/PromptTokens is the best share any client
	// could reach with the same conversation.
	NewTokens int
}

type prefixCache struct {
	prompts [][]byte        // newest first
	seen    map[string]bool // every message and tool list sent so far
	stats   CacheStats
}

// ModelPromptCache makes the server model a provider's prompt cache from
// now on (see CacheStats): steps that report usage without cached tokens
// of their own report those the cache would have served.
func (s *Server) ModelPromptCache() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		s.cache = &prefixCache{seen: map[string]bool{}}
	}
}

// CacheStats returns the prompt cache's figures so far; zero without
// WithPromptCache.
func (s *Server) CacheStats() CacheStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		return CacheStats{}
	}
	return s.cache.stats
}

// cached returns step with the cached tokens the cache serves for the
// request body, and records the request's prompt in the cache.
func (s *Server) cached(body []byte, step Step) Step {
	var w struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    json.RawMessage   `json:"tools"`
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil || step.Usage == nil || step.Status != 0 || step.Raw != "" || json.Unmarshal(body, &w) != nil {
		return step
	}
	c := s.cache
	parts := append([]json.RawMessage{w.Tools}, w.Messages...)
	var prompt bytes.Buffer
	fresh := 0 // bytes of parts never sent before
	for _, p := range parts {
		prompt.Write(p)
		prompt.WriteByte('\n')
		if !c.seen[string(p)] {
			c.seen[string(p)] = true
			fresh += len(p) + 1
		}
	}
	b := prompt.Bytes()
	common := 0
	for _, earlier := range c.prompts {
		common = max(common, commonPrefix(b, earlier))
	}
	c.prompts = append([][]byte{b}, c.prompts...)
	if len(c.prompts) > cacheEntries {
		c.prompts = c.prompts[:cacheEntries]
	}
	u := *step.Usage
	tokens := func(n int) int { return int(int64(u.PromptTokens) * int64(n) / int64(len(b))) }
	if u.CachedTokens == 0 {
		if n := tokens(common) / cacheStep * cacheStep; n >= cacheMin {
			u.CachedTokens = n
		}
	}
	c.stats.PromptTokens += u.PromptTokens
	c.stats.CachedTokens += u.CachedTokens
	c.stats.NewTokens += tokens(fresh)
	step.Usage = &u
	return step
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
