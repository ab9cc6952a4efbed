package slack

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// GroupPrefix qualifies a Slack user group id in access lists and in
// chat.Author.Groups: "slack-group:S0123".
const GroupPrefix = "slack-group:"

// memberLister is the one Web API call group lookups need
// (usergroups.users.list); *slack.Client implements it.
type memberLister interface {
	GetUserGroupMembersContext(ctx context.Context, group string, opts ...slack.GetUserGroupMembersOption) ([]string, error)
}

// groupRetry is how long a failed lookup counts as "no members" before it
// is tried again; shorter than a TTL so that a passing fault does not lock
// members out for long.
const groupRetry = 30 * time.Second

// groups tells which of the user groups named in the access lists a user
// belongs to, from usergroups.users.list, caching each group's members for
// a TTL so that events do not each cost a call. A lookup that fails counts
// as an empty group (access fails closed) and is logged once until it
// works again. Safe for concurrent use.
type groups struct {
	api memberLister
	ids []string // the groups to look up, without the prefix
	ttl time.Duration
	now func() time.Time
	log *slog.Logger

	mu    sync.Mutex
	cache map[string]*groupEntry // guarded by mu
}

// groupEntry is one group's cached members.
type groupEntry struct {
	mu      sync.Mutex      // held while the entry is read or refreshed
	members map[string]bool // guarded by mu; nil after a failed lookup
	until   time.Time       // guarded by mu: when to look again
	failing bool            // guarded by mu: the last lookup failed (and was logged)
}

// newGroups returns the resolver of the groups in ids (entries with or
// without GroupPrefix; empty ones and repeats are dropped).
func newGroups(api memberLister, ids []string, ttl time.Duration, log *slog.Logger) *groups {
	g := &groups{api: api, ttl: ttl, now: time.Now, log: log, cache: map[string]*groupEntry{}}
	seen := map[string]bool{}
	for _, id := range ids {
		id = strings.TrimSpace(strings.TrimPrefix(id, GroupPrefix))
		if id != "" && !seen[id] {
			seen[id] = true
			g.ids = append(g.ids, id)
		}
	}
	return g
}

// of returns the qualified groups ("slack-group:S…") of user among those
// the resolver knows; nil when it knows none or user is empty.
func (g *groups) of(ctx context.Context, user string) []string {
	if g == nil || len(g.ids) == 0 || user == "" {
		return nil
	}
	var out []string
	for _, id := range g.ids {
		if g.entry(id).has(ctx, g, id, user) {
			out = append(out, GroupPrefix+id)
		}
	}
	return out
}

func (g *groups) entry(id string) *groupEntry {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.cache[id]
	if e == nil {
		e = &groupEntry{}
		g.cache[id] = e
	}
	return e
}

// has reports whether user is a member of group id, looking the members
// up when the cached list is missing or stale.
func (e *groupEntry) has(ctx context.Context, g *groups, id, user string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := g.now()
	if now.Before(e.until) {
		return e.members[user]
	}
	users, err := g.api.GetUserGroupMembersContext(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return false // the event was given up; say nothing, cache nothing
		}
		if !e.failing {
			g.log.Warn("cannot read a slack user group's members; treating its members as outsiders until it works (is the usergroups:read scope granted?)",
				"group", id, "err", classify("usergroups.users.list", err))
		}
		e.members, e.failing, e.until = nil, true, now.Add(min(groupRetry, g.ttl))
		return false
	}
	if e.failing {
		g.log.Info("slack user group readable again", "group", id)
	}
	e.members = make(map[string]bool, len(users))
	for _, u := range users {
		e.members[u] = true
	}
	e.failing, e.until = false, now.Add(g.ttl)
	return e.members[user]
}
