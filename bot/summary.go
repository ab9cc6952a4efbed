package main

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// listening is what serve and gateway listen on, once they do.
type listening struct {
	http  string // http.addr's bound address
	admin string // admin.addr's, "" when it is not set
}

// startupSummary returns the attributes of the one line `baton serve` and
// `baton gateway` log when they have started: the listen addresses first
// (tests and scripts read http=), then the adapters on (with Slack's mode),
// the task API, the queue, the store, the model endpoint (without
// credentials) and the model, and the workers (0 for gateway).
func startupSummary(cfg Config, at listening, workers int) []any {
	attrs := []any{slog.String("http", at.http)}
	if at.admin != "" {
		attrs = append(attrs, slog.String("admin", at.admin))
	}
	var adapters []string
	if cfg.Slack.Enabled {
		adapters = append(adapters, "slack ("+cfg.Slack.Mode+" mode)")
	}
	if cfg.Discord.Enabled {
		adapters = append(adapters, "discord")
	}
	if len(adapters) == 0 {
		adapters = append(adapters, "none")
	}
	api := "off"
	if cfg.API.Token != "" {
		api = "on"
	}
	queue := queueKind(cfg)
	switch {
	case cfg.Redis.URL != "":
		queue = redactURL(cfg.Redis.URL)
	case len(cfg.Redis.ClusterAddrs) > 0:
		queue = "redis cluster " + strings.Join(cfg.Redis.ClusterAddrs, ", ")
	}
	return append(attrs,
		slog.String("adapters", strings.Join(adapters, ", ")),
		slog.String("api", api),
		slog.String("queue", queue),
		slog.String("store", storeName(cfg)),
		slog.String("llm", redactURL(cfg.LLM.BaseURL)),
		slog.String("model", cfg.LLM.Model),
		slog.Int("workers", workers),
	)
}

// adapterTokens are the keys of each adapter's credentials, by the key
// that turns it on.
var adapterTokens = []struct {
	name, enabled string
	tokens        []string
}{
	{"Slack", "slack.enabled", []string{"slack.bot_token", "slack.app_token", "slack.signing_secret"}},
	{"Discord", "discord.enabled", []string{"discord.bot_token"}},
}

// startupWarnings says what in the configuration is likely a mistake that
// Validate accepts, one warning each: an adapter's token set while the
// adapter is off (naming what set the token and the variable that turns
// the adapter on), and variables whose trailing carriage return Baton
// removed (a .env file with Windows line endings).
func startupWarnings(cfg Config, origins Origins, log *slog.Logger) {
	for _, a := range adapterTokens {
		on, _ := cfg.keyValue(a.enabled)
		if on.Bool() {
			continue
		}
		var set []string
		for _, key := range a.tokens {
			if v, _ := cfg.keyValue(key); v.String() != "" {
				set = append(set, tokenSource(key, origins.Of(key)))
			}
		}
		if len(set) > 0 {
			log.Warn(fmt.Sprintf("a %s token is set but the %s adapter is off: set %s=true (or %s: true in the config file) to connect",
				a.name, a.name, envVar(a.enabled), a.enabled), "set", strings.Join(set, ", "))
		}
	}
	var cr []string
	for _, o := range origins {
		if o.CR {
			cr = append(cr, o.Env)
		}
	}
	if len(cr) > 0 {
		slices.Sort(cr)
		log.Warn("removed the carriage return that ended these variables: the .env file has Windows line endings (CRLF); save it with LF", "vars", strings.Join(cr, ", "))
	}
}

// tokenSource names what set a token key: its variable, or the file and
// line with the key.
func tokenSource(key string, o Origin) string {
	switch {
	case o.Env != "":
		return o.Env
	case o.File != "":
		return fmt.Sprintf("%s (%s)", key, o)
	}
	return key
}
