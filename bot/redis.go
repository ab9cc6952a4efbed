package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis URL schemes of a Sentinel-managed master.
const (
	sentinelScheme    = "redis+sentinel"
	sentinelTLSScheme = "rediss+sentinel"
)

// redisTarget is the Redis that redis.url or redis.cluster_addrs names:
// exactly one of its option sets is non-nil.
type redisTarget struct {
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
	// name says where it is, for people and the log, without a password:
	// "127.0.0.1:6379", "sentinel master mymaster (10.0.0.1:26379, …)",
	// "cluster 10.0.0.1:7000, 10.0.0.2:7000".
	name string
}

// redisTuning overrides go-redis defaults; zero fields keep them.
type redisTuning struct {
	MaxRetries, DialerRetries int
	DialTimeout, ReadTimeout  time.Duration
}

// enabled reports whether the queue is on Redis rather than in-process.
func (c RedisConfig) enabled() bool {
	return c.URL != "" || len(c.ClusterAddrs) > 0
}

// parseRedis reads c. Errors are *ConfigError naming the key at fault,
// and never show a password.
func parseRedis(c RedisConfig) (redisTarget, error) {
	if c.URL != "" && len(c.ClusterAddrs) > 0 {
		return redisTarget{}, &ConfigError{Key: "redis.cluster_addrs", Msg: "set either redis.url (one Redis, or Sentinel) or redis.cluster_addrs (Redis Cluster), not both"}
	}
	if len(c.ClusterAddrs) == 0 && (c.ClusterUsername != "" || c.ClusterPassword != "" || c.ClusterTLS) {
		return redisTarget{}, &ConfigError{Key: "redis.cluster_password", Msg: "redis.cluster_username, redis.cluster_password and redis.cluster_tls apply to redis.cluster_addrs only; put a single Redis's or Sentinel's credentials in redis.url"}
	}
	if len(c.ClusterAddrs) > 0 {
		for _, a := range c.ClusterAddrs {
			if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" {
				return redisTarget{}, &ConfigError{Key: "redis.cluster_addrs", Msg: fmt.Sprintf("must be a list of host:port, got %q", a)}
			}
		}
		o := &redis.ClusterOptions{Addrs: c.ClusterAddrs, Username: c.ClusterUsername, Password: c.ClusterPassword.Reveal()}
		if c.ClusterTLS {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		return redisTarget{
			cluster: o,
			name:    "cluster " + strings.Join(c.ClusterAddrs, ", "),
		}, nil
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return redisTarget{}, badRedisURL(c.URL, "")
	}
	switch u.Scheme {
	case sentinelScheme, sentinelTLSScheme:
		return parseSentinel(c.URL, u)
	case "redis", "rediss", "unix":
		if u.Host == "" && u.Scheme != "unix" {
			return redisTarget{}, badRedisURL(c.URL, "it has no host")
		}
		o, err := redis.ParseURL(c.URL)
		if err != nil {
			return redisTarget{}, badRedisURL(c.URL, redisErr(err))
		}
		return redisTarget{single: o, name: o.Addr}, nil
	}
	return redisTarget{}, badRedisURL(c.URL, "")
}

// parseSentinel reads
// redis+sentinel://[[user]:password@]host:port[,host:port…]/master[/db]:
// the sentinels to ask, the name of the master they watch, and the
// database. The user and password authenticate with the master and its
// replicas, not with the sentinels. rediss+sentinel:// speaks TLS to them.
func parseSentinel(raw string, u *url.URL) (redisTarget, error) {
	if u.RawQuery != "" {
		return redisTarget{}, badRedisURL(raw, "a Sentinel URL takes no query parameters")
	}
	var addrs []string
	for a := range strings.SplitSeq(u.Host, ",") {
		if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" {
			return redisTarget{}, badRedisURL(raw, "sentinels must be host:port, separated by commas")
		}
		addrs = append(addrs, a)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if parts[0] == "" || len(parts) > 2 {
		return redisTarget{}, badRedisURL(raw, "its path must be /master or /master/db")
	}
	o := &redis.FailoverOptions{MasterName: parts[0], SentinelAddrs: addrs}
	if len(parts) == 2 {
		db, err := strconv.Atoi(parts[1])
		if err != nil || db < 0 {
			return redisTarget{}, badRedisURL(raw, "the database must be a number")
		}
		o.DB = db
	}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	if u.Scheme == sentinelTLSScheme {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return redisTarget{failover: o, name: fmt.Sprintf("sentinel master %s (%s)", o.MasterName, strings.Join(addrs, ", "))}, nil
}

func badRedisURL(raw, why string) *ConfigError {
	msg := "must be redis://, rediss:// or unix:// (one Redis), or redis+sentinel://host:port[,host:port…]/master[/db] (Sentinel); got " + redactURL(raw)
	if why != "" {
		msg += ": " + why
	}
	return &ConfigError{Key: "redis.url", Msg: msg}
}

// redisErr is go-redis's parse error without its "redis: " prefix; it
// never quotes the password.
func redisErr(err error) string {
	return strings.TrimPrefix(err.Error(), "redis: ")
}

// client returns a new client of t, tuned. The caller closes it.
func (t redisTarget) client(tune redisTuning) redis.UniversalClient {
	set := func(maxRetries, dialerRetries *int, dial, read *time.Duration) {
		if tune.MaxRetries != 0 {
			*maxRetries = tune.MaxRetries
		}
		if tune.DialerRetries != 0 {
			*dialerRetries = tune.DialerRetries
		}
		if tune.DialTimeout != 0 {
			*dial = tune.DialTimeout
		}
		if tune.ReadTimeout != 0 {
			*read = tune.ReadTimeout
		}
	}
	switch {
	case t.cluster != nil:
		o := *t.cluster
		set(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ReadTimeout)
		return redis.NewClusterClient(&o)
	case t.failover != nil:
		o := *t.failover
		set(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ReadTimeout)
		return redis.NewFailoverClient(&o)
	default:
		o := *t.single
		set(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ReadTimeout)
		return redis.NewClient(&o)
	}
}
