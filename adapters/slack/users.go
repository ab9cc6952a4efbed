package slack

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
)

// userInfo is the one Web API call naming users needs (users.info);
// *slack.Client implements it.
type userInfo interface {
	GetUserInfoContext(ctx context.Context, user string, opts ...slack.GetUserInfoOption) (*slack.User, error)
}

// Bounds of user lookups.
const (
	// maxLookups is how many users.info calls one event may make: the
	// people a message mentions beyond that, not cached yet, keep their
	// id (@U123). Slack allows about 100 calls a minute.
	maxLookups = 20
	// userTTL is how long a name is cached; userRetry how long a user
	// Slack could not name stays unnamed before it is asked again.
	userTTL   = time.Hour
	userRetry = 5 * time.Minute
	// maxUsers bounds the cache; when it is full, expired names go, and
	// if none has expired, all of them.
	maxUsers = 10_000
	// maxName caps a name, in runes: it is written into the text the
	// model reads.
	maxName = 80
)

// users names Slack users as people see them (their display name, else
// their full name, else their user name) from users.info, caching each
// name so that events do not each cost a call. Safe for concurrent use.
type users struct {
	api userInfo
	now func() time.Time
	log *slog.Logger

	mu    sync.Mutex
	cache map[string]userEntry // guarded by mu
}

type userEntry struct {
	name  string // "": Slack could not name the user
	until time.Time
}

func newUsers(api userInfo, log *slog.Logger) *users {
	return &users{api: api, now: time.Now, log: log, cache: map[string]userEntry{}}
}

// lookup returns the user lookup of one event, for chattext.Readable: it
// answers from the cache, and asks users.info about at most maxLookups
// users not cached. A user it cannot name is answered false, and nothing
// tells the person: the mention then reads @U123.
func (u *users) lookup(ctx context.Context) func(id string) (string, bool) {
	asked := 0
	return func(id string) (string, bool) {
		if name, ok := u.cached(id); ok {
			return name, name != ""
		}
		if asked >= maxLookups || ctx.Err() != nil {
			return "", false
		}
		asked++
		name := u.fetch(ctx, id)
		return name, name != ""
	}
}

func (u *users) cached(id string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e, ok := u.cache[id]
	if !ok || !u.now().Before(e.until) {
		return "", false
	}
	return e.name, true
}

// fetch asks users.info for id's name and caches the answer; "" when
// Slack cannot name the user.
func (u *users) fetch(ctx context.Context, id string) string {
	info, err := u.api.GetUserInfoContext(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return "" // the event was given up: cache nothing
		}
		u.log.Debug("slack cannot name a user; the mention keeps the id", "user", id, "err", classify("users.info", err))
		u.store(id, "", userRetry)
		return ""
	}
	name := info.Profile.DisplayName
	for _, n := range []string{info.Profile.RealName, info.RealName, info.Name} {
		if strings.TrimSpace(name) == "" {
			name = n
		}
	}
	name = strings.Join(strings.Fields(name), " ")
	if utf8.RuneCountInString(name) > maxName {
		name = string([]rune(name)[:maxName])
	}
	u.store(id, name, userTTL)
	return name
}

func (u *users) store(id, name string, ttl time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	if len(u.cache) >= maxUsers {
		for k, e := range u.cache {
			if !now.Before(e.until) {
				delete(u.cache, k)
			}
		}
		if len(u.cache) >= maxUsers {
			clear(u.cache)
		}
	}
	u.cache[id] = userEntry{name: name, until: now.Add(ttl)}
}
