package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/tools"
)

// SearchTool is the name of the tool that stands for a job's MCP tools
// when they are too many to offer.
const SearchTool = "mcp_search"

// Search limits.
const (
	defaultSearchLimit = 5
	maxSearchLimit     = 10
)

// searchTool finds a session's tools by name and description and loads
// the ones found (tools.Result.Load), so that the model can call them from
// its next request on.
type searchTool struct{ s *Session }

func (*searchTool) Name() string { return SearchTool }

func (st *searchTool) Description(tx *catalog.Texts) string {
	st.s.mu.Lock()
	n := len(st.s.tools)
	st.s.mu.Unlock()
	var names []string
	for _, srv := range st.s.servers {
		names = append(names, srv.cfg.Name)
	}
	return tx.Fill("tools.mcp.search.description", "n", strconv.Itoa(n), "servers", strings.Join(names, ", "), "limit", strconv.Itoa(defaultSearchLimit))
}

func (*searchTool) Schema(tx *catalog.Texts) json.RawMessage {
	desc := func(k string) string { b, _ := json.Marshal(tx.Text("tools.mcp.search.param." + k)); return string(b) }
	return json.RawMessage(`{"type":"object","properties":{` +
		`"query":{"type":"string","description":` + desc("query") + `},` +
		`"names":{"type":"array","items":{"type":"string"},"description":` + desc("names") + `},` +
		`"limit":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(maxSearchLimit) + `,"description":` + desc("limit") + `}},` +
		`"additionalProperties":false}`)
}

type searchArgs struct {
	Query string   `json:"query"`
	Names []string `json:"names"`
	Limit int      `json:"limit"`
}

func (st *searchTool) Call(_ context.Context, env *tools.Env, raw json.RawMessage) tools.Result {
	tx := env.Texts
	var a searchArgs
	if len(strings.TrimSpace(string(raw))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return tools.Result{Text: SearchTool + ": " + tx.Fill("tools.err.invalid_arguments", "err", err.Error()), IsError: true}
		}
	}
	if strings.TrimSpace(a.Query) == "" && len(a.Names) == 0 {
		return tools.Result{Text: SearchTool + ": " + tx.Text("tools.mcp.search.need_query"), IsError: true}
	}
	limit := a.Limit
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	limit = min(limit, maxSearchLimit)
	st.s.mu.Lock()
	all := slices.Clone(st.s.tools)
	st.s.mu.Unlock()

	var found []*Tool
	var unknown []string
	for _, n := range a.Names {
		i := slices.IndexFunc(all, func(t *Tool) bool { return t.def.name == n || t.def.remote == n })
		if i < 0 {
			unknown = append(unknown, n)
			continue
		}
		if !slices.Contains(found, all[i]) {
			found = append(found, all[i])
		}
	}
	if q := strings.TrimSpace(a.Query); q != "" {
		for _, t := range rank(all, q) {
			if len(found) >= limit+len(a.Names) {
				break
			}
			if !slices.Contains(found, t) {
				found = append(found, t)
			}
		}
	}
	var b strings.Builder
	if len(unknown) > 0 {
		b.WriteString(tx.Fill("tools.mcp.search.unknown", "names", strings.Join(unknown, ", ")) + "\n")
	}
	if len(found) == 0 {
		var some []string
		for _, t := range all[:min(len(all), 30)] {
			some = append(some, t.def.name)
		}
		b.WriteString(tx.Fill("tools.mcp.search.none", "query", strconv.Quote(a.Query), "names", strings.Join(some, ", ")))
		return tools.Result{Text: b.String()}
	}
	b.WriteString(tx.Fill("tools.mcp.search.loaded", "n", strconv.Itoa(len(found))))
	load := make([]string, 0, len(found))
	for _, t := range found {
		b.WriteString("\n- " + t.def.name + ": " + capRunes(oneLine(t.Description(tx)), 200))
		load = append(load, t.def.name)
	}
	return tools.Result{Text: b.String(), Load: load}
}

// rank returns the tools that match query's words in their names or
// descriptions, best first (a word in the name counts three times), ties
// in the servers' order.
func rank(all []*Tool, query string) []*Tool {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	})
	type scored struct {
		t     *Tool
		score int
	}
	var hits []scored
	for _, t := range all {
		name := strings.ToLower(t.def.remote)
		desc := strings.ToLower(t.def.desc)
		score := 0
		for _, w := range words {
			if strings.Contains(name, w) {
				score += 3
			}
			if strings.Contains(desc, w) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, scored{t, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b scored) int { return b.score - a.score })
	out := make([]*Tool, len(hits))
	for i, h := range hits {
		out[i] = h.t
	}
	return out
}
