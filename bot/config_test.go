package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// mapEnv returns an environment lookup over m (nothing else is set).
func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeConfig writes content to a config file in a temporary directory and
// returns its path.
func writeConfig(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// resolvedDefaults is DefaultConfig as LoadConfig returns it from the
// current working directory.
func resolvedDefaults(t testing.TB) Config {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.resolvePaths(wd, wd, nil)
	return cfg
}

func TestLoadConfigWithoutFile(t *testing.T) {
	got, err := LoadConfig("", mapEnv(nil))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if diff := cmp.Diff(resolvedDefaults(t), got); diff != "" {
		t.Errorf("config without a file (-want +got):\n%s", diff)
	}
	if !filepath.IsAbs(got.DataDir) || !filepath.IsAbs(got.PiecesDir) {
		t.Errorf("paths not resolved: data_dir %q, pieces_dir %q", got.DataDir, got.PiecesDir)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestLoadConfigFile(t *testing.T) {
	path := writeConfig(t, "llm:\n  model: local-model\nqueue:\n  lease: 45s\ndata_dir: /srv/baton\n")
	want := resolvedDefaults(t)
	want.LLM.Model = "local-model"
	want.Queue.Lease = 45 * time.Second
	want.DataDir = "/srv/baton"

	t.Run("flag", func(t *testing.T) {
		got, err := LoadConfig(path, mapEnv(nil))
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("BATON_CONFIG", func(t *testing.T) {
		got, err := LoadConfig("", mapEnv(map[string]string{"BATON_CONFIG": path}))
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("flag wins over BATON_CONFIG", func(t *testing.T) {
		other := writeConfig(t, "llm:\n  model: other\n")
		got, err := LoadConfig(path, mapEnv(map[string]string{"BATON_CONFIG": other}))
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		if got.LLM.Model != "local-model" {
			t.Errorf("llm.model = %q, want the --config file's local-model", got.LLM.Model)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		got, err := LoadConfig(writeConfig(t, "# nothing set\n"), mapEnv(nil))
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		if diff := cmp.Diff(resolvedDefaults(t), got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope.yaml")
		_, err := LoadConfig(missing, mapEnv(nil))
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), missing) {
			t.Errorf("LoadConfig(missing) = %v, want a *ConfigError naming %s", err, missing)
		}
	})
}

func TestLoadConfigEnv(t *testing.T) {
	// The file sets every overridable key; the environment must win.
	path := writeConfig(t, `
data_dir: /from/file
llm:
  base_url: http://file.invalid/v1
  api_key: file-key
  model: file-model
redis:
  url: redis://file:6379
api:
  token: file-api
slack:
  bot_token: file-bot
  app_token: file-app
  signing_secret: file-signing
discord:
  bot_token: file-discord
`)
	tests := []struct {
		env  string
		val  string
		got  func(Config) string
		file string
	}{
		{"OPENAI_API_KEY", "sk-env", func(c Config) string { return c.LLM.APIKey.Reveal() }, "file-key"},
		{"OPENAI_BASE_URL", "http://127.0.0.1:11434/v1", func(c Config) string { return c.LLM.BaseURL }, "http://file.invalid/v1"},
		{"BATON_LLM_MODEL", "llama3", func(c Config) string { return c.LLM.Model }, "file-model"},
		{"REDIS_URL", "redis://env:6380/1", func(c Config) string { return c.Redis.URL }, "redis://file:6379"},
		{"SLACK_BOT_TOKEN", "xoxb-env", func(c Config) string { return c.Slack.BotToken.Reveal() }, "file-bot"},
		{"SLACK_APP_TOKEN", "xapp-env", func(c Config) string { return c.Slack.AppToken.Reveal() }, "file-app"},
		{"SLACK_SIGNING_SECRET", "sign-env", func(c Config) string { return c.Slack.SigningSecret.Reveal() }, "file-signing"},
		{"DISCORD_BOT_TOKEN", "discord-env", func(c Config) string { return c.Discord.BotToken.Reveal() }, "file-discord"},
		{"BATON_API_TOKEN", "api-env", func(c Config) string { return c.API.Token.Reveal() }, "file-api"},
		{"BATON_DATA_DIR", "/from/env", func(c Config) string { return c.DataDir }, "/from/file"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			got, err := LoadConfig(path, mapEnv(map[string]string{tt.env: tt.val}))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if v := tt.got(got); v != tt.val {
				t.Errorf("with %s=%q: value %q, want %q", tt.env, tt.val, v, tt.val)
			}
			got, err = LoadConfig(path, mapEnv(map[string]string{tt.env: ""}))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if v := tt.got(got); v != tt.file {
				t.Errorf("with %s empty: value %q, want the file's %q", tt.env, v, tt.file)
			}
		})
	}
}

// TestLoadConfigRelativePaths: the paths a config file writes resolve
// against the file's directory, wherever Baton starts; the defaults and the
// environment's paths against the working directory.
func TestLoadConfigRelativePaths(t *testing.T) {
	path := writeConfig(t, "data_dir: state\npieces_dir: ./my/pieces\n")
	dir := filepath.Dir(path)
	wd, _ := os.Getwd()

	got, err := LoadConfig(path, mapEnv(nil))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := []string{filepath.Join(dir, "state"), filepath.Join(dir, "my/pieces")}
	if diff := cmp.Diff(want, []string{got.DataDir, got.PiecesDir}); diff != "" {
		t.Errorf("the file's paths resolve against its directory %s (-want +got):\n%s", dir, diff)
	}

	got, err = LoadConfig(path, mapEnv(map[string]string{"BATON_DATA_DIR": "from-env"}))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want = []string{filepath.Join(wd, "from-env"), filepath.Join(dir, "my/pieces")}
	if diff := cmp.Diff(want, []string{got.DataDir, got.PiecesDir}); diff != "" {
		t.Errorf("an environment path resolves against the working directory (-want +got):\n%s", diff)
	}

	got, err = LoadConfig(writeConfig(t, "locale: en\n"), mapEnv(nil))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want = []string{filepath.Join(wd, "data"), filepath.Join(wd, "configs/pieces")}
	if diff := cmp.Diff(want, []string{got.DataDir, got.PiecesDir}); diff != "" {
		t.Errorf("default paths resolve against the working directory (-want +got):\n%s", diff)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string // substrings of the error, in order of importance
	}{
		{"unknown top-level key", "locale: en\nmodel: x\n", []string{":2: model: unknown key"}},
		{"unknown nested key", "llm:\n  model: x\n  modle: y\n", []string{":3: llm.modle: unknown key", "model"}},
		{"unknown deep key", "tools:\n  bash:\n    timeout: 5s\n    sandbx: none\n", []string{":4: tools.bash.sandbx: unknown key"}},
		{"secret under wrong section", "llm:\n  bot_token: x\n", []string{":2: llm.bot_token: unknown key"}},
		{"bad indentation", "llm:\n  model: x\n base_url: y\n", []string{":2: ", "did not find expected key"}},
		{"unclosed quote", "data_dir: ./data\nlocale: \"en\n", []string{":2: "}},
		{"tab indentation", "llm:\n\tmodel: x\n", []string{":2: "}},
		{"bad duration", "queue:\n  lease: soon\n", []string{":2: queue.lease: ", "soon"}},
		{"integer duration", "queue:\n  lease: 30\n", []string{`:2: queue.lease: want a duration such as 30s, got "30"`}},
		{"bad integer", "workers:\n  concurrency: many\n", []string{`:2: workers.concurrency: want a whole number, got "many"`}},
		{"scalar for section", "llm: gpt\n", []string{`:1: llm: want a mapping of keys, got "gpt"`}},
		{"list for scalar", "locale: [en, ja]\n", []string{":1: locale: "}},
		{"bool for float", "context:\n  warn: yes\n", []string{`:2: context.warn: want a number, got "yes"`}},
		{"duplicate key", "locale: en\nlocale: ja\n", []string{":2: locale: ", "already defined"}},
		{"not a mapping", "- a\n- b\n", []string{":1: ", "mapping"}},
		{"two documents", "locale: en\n---\nlocale: ja\n", []string{"one YAML document"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.content)
			_, err := LoadConfig(path, mapEnv(nil))
			if err == nil {
				t.Fatalf("LoadConfig accepted:\n%s", tt.content)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error %v (%T) is not a *ConfigError", err, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path) {
				t.Errorf("error %q does not start with the file %s", msg, path)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		key    string
	}{
		{"data_dir empty", func(c *Config) { c.DataDir = "" }, "data_dir"},
		{"default_piece empty", func(c *Config) { c.DefaultPiece = "" }, "default_piece"},
		{"locale", func(c *Config) { c.Locale = "fr" }, "locale"},
		{"timezone unknown", func(c *Config) { c.Timezone = "Mars/Olympus" }, "timezone"},
		{"timezone empty", func(c *Config) { c.Timezone = "" }, "timezone"},
		{"llm.base_url empty", func(c *Config) { c.LLM.BaseURL = "" }, "llm.base_url"},
		{"llm.base_url scheme", func(c *Config) { c.LLM.BaseURL = "ftp://x/v1" }, "llm.base_url"},
		{"llm.base_url no host", func(c *Config) { c.LLM.BaseURL = "localhost:11434" }, "llm.base_url"},
		{"llm.model", func(c *Config) { c.LLM.Model = " " }, "llm.model"},
		{"llm.context_window", func(c *Config) { c.LLM.ContextWindow = 0 }, "llm.context_window"},
		{"llm.max_output_tokens zero", func(c *Config) { c.LLM.MaxOutputTokens = 0 }, "llm.max_output_tokens"},
		{"llm.max_output_tokens over window", func(c *Config) { c.LLM.MaxOutputTokens = c.LLM.ContextWindow }, "llm.max_output_tokens"},
		{"llm.request_timeout", func(c *Config) { c.LLM.RequestTimeout = 0 }, "llm.request_timeout"},
		{"llm.max_retries", func(c *Config) { c.LLM.MaxRetries = -1 }, "llm.max_retries"},
		{"llm.models", func(c *Config) { c.LLM.Models = map[string]string{"fast": "gpt-4o-mini", "bad": "two words"} }, "llm.models.bad"},
		{"llm.max_tokens_per_job", func(c *Config) { c.LLM.MaxTokensPerJob = -5 }, "llm.max_tokens_per_job"},
		{"context.warn zero", func(c *Config) { c.Context.Warn = 0 }, "context.warn"},
		{"context.warn above prompt", func(c *Config) { c.Context.Warn = 0.9 }, "context.prompt"},
		{"context.prompt equal warn", func(c *Config) { c.Context.Prompt, c.Context.Compaction = 0.70, "off" }, "context.prompt"},
		{"context.prompt below compact", func(c *Config) { c.Context.Prompt = 0.75 }, "context.compact"},
		{"context.force_transition below prompt", func(c *Config) { c.Context.ForceTransition = 0.8 }, "context.force_transition"},
		{"context.exhausted above 1", func(c *Config) { c.Context.Exhausted = 1.5 }, "context.exhausted"},
		{"context.tool_result_max_tokens", func(c *Config) { c.Context.ToolResultMaxTokens = 0 }, "context.tool_result_max_tokens"},
		{"context.compaction", func(c *Config) { c.Context.Compaction = "yes" }, "context.compaction"},
		{"context.mask zero", func(c *Config) { c.Context.Mask = 0 }, "context.mask"},
		{"context.compact above 1", func(c *Config) { c.Context.Compact = 1.2 }, "context.compact"},
		{"context.compact below mask", func(c *Config) { c.Context.Mask, c.Context.Compact = 0.7, 0.65 }, "context.compact"},
		{"context.compact not below prompt", func(c *Config) { c.Context.Compact = 0.85 }, "context.compact"},
		{"agent.reminder_after", func(c *Config) { c.Agent.ReminderAfter = -1 }, "agent.reminder_after"},
		{"redis.url scheme", func(c *Config) { c.Redis.URL = "http://localhost:6379" }, "redis.url"},
		{"redis.url no scheme", func(c *Config) { c.Redis.URL = "localhost:6379" }, "redis.url"},
		{"redis.url no host", func(c *Config) { c.Redis.URL = "redis:///0" }, "redis.url"},
		{"redis.url sentinel without master", func(c *Config) { c.Redis.URL = "redis+sentinel://s1:26379" }, "redis.url"},
		{"redis.url sentinel bad addr", func(c *Config) { c.Redis.URL = "redis+sentinel://s1:26379,s2/mymaster" }, "redis.url"},
		{"redis.url sentinel bad db", func(c *Config) { c.Redis.URL = "redis+sentinel://s1:26379/mymaster/x" }, "redis.url"},
		{"redis.url sentinel query", func(c *Config) { c.Redis.URL = "redis+sentinel://s1:26379/mymaster?password=pw" }, "redis.url"},
		{"redis.cluster_addrs not host:port", func(c *Config) { c.Redis.ClusterAddrs = []string{"10.0.0.1:7000", "10.0.0.2"} }, "redis.cluster_addrs"},
		{"redis.url and redis.cluster_addrs", func(c *Config) {
			c.Redis.URL, c.Redis.ClusterAddrs = "redis://127.0.0.1:6379", []string{"10.0.0.1:7000"}
		}, "redis.cluster_addrs"},
		{"queue.lease", func(c *Config) { c.Queue.Lease = -time.Second }, "queue.lease"},
		{"queue.heartbeat zero", func(c *Config) { c.Queue.Heartbeat = 0 }, "queue.heartbeat"},
		{"queue.heartbeat not below lease", func(c *Config) { c.Queue.Heartbeat = c.Queue.Lease }, "queue.heartbeat"},
		{"queue.max_failures", func(c *Config) { c.Queue.MaxFailures = 0 }, "queue.max_failures"},
		{"workers.concurrency", func(c *Config) { c.Workers.Concurrency = 0 }, "workers.concurrency"},
		{"workers.shutdown_grace", func(c *Config) { c.Workers.ShutdownGrace = 0 }, "workers.shutdown_grace"},
		{"tools.bash.sandbox", func(c *Config) { c.Tools.Bash.Sandbox = "docker" }, "tools.bash.sandbox"},
		{"tools.bash.timeout", func(c *Config) { c.Tools.Bash.Timeout = 0 }, "tools.bash.timeout"},
		{"files.max_bytes", func(c *Config) { c.Files.MaxBytes = 0 }, "files.max_bytes"},
		{"workspaces.retention", func(c *Config) { c.Workspaces.Retention = 0 }, "workspaces.retention"},
		{"workspaces.max_bytes", func(c *Config) { c.Workspaces.MaxBytes = -1 }, "workspaces.max_bytes"},
		{"workspaces.min_free_bytes", func(c *Config) { c.Workspaces.MinFreeBytes = -1 }, "workspaces.min_free_bytes"},
		{"retention.finished_jobs", func(c *Config) { c.Retention.FinishedJobs = -time.Hour }, "retention.finished_jobs"},
		{"retention.events", func(c *Config) { c.Retention.Events = -time.Hour }, "retention.events"},
		{"retention.comments", func(c *Config) { c.Retention.Comments = -time.Hour }, "retention.comments"},
		{"http.addr empty", func(c *Config) { c.HTTP.Addr = "" }, "http.addr"},
		{"http.addr no port", func(c *Config) { c.HTTP.Addr = "localhost" }, "http.addr"},
		{"admin.addr", func(c *Config) { c.Admin.Addr = "9090" }, "admin.addr"},
		{"log.format", func(c *Config) { c.Log.Format = "xml" }, "log.format"},
		{"log.level", func(c *Config) { c.Log.Level = "verbose" }, "log.level"},
		{"slack.mode", func(c *Config) { c.Slack.Mode = "rtm" }, "slack.mode"},
		{"slack.api_url", func(c *Config) { c.Slack.APIURL = "slack.com" }, "slack.api_url"},
		{"slack.command", func(c *Config) { c.Slack.Command = "baton" }, "slack.command"},
		{"slack.command with spaces", func(c *Config) { c.Slack.Command = "/ba ton" }, "slack.command"},
		{"slack socket without bot token", func(c *Config) {
			c.Slack.Enabled, c.Slack.AppToken = true, "xapp-1"
		}, "slack.bot_token"},
		{"slack socket without app token", func(c *Config) {
			c.Slack.Enabled, c.Slack.BotToken = true, "xoxb-1"
		}, "slack.app_token"},
		{"slack http without signing secret", func(c *Config) {
			c.Slack.Enabled, c.Slack.Mode, c.Slack.BotToken = true, "http", "xoxb-1"
		}, "slack.signing_secret"},
		{"slack http without bot token", func(c *Config) {
			c.Slack.Enabled, c.Slack.Mode, c.Slack.SigningSecret = true, "http", "s"
		}, "slack.bot_token"},
		{"discord.api_url", func(c *Config) { c.Discord.APIURL = "" }, "discord.api_url"},
		{"discord without bot token", func(c *Config) { c.Discord.Enabled = true }, "discord.bot_token"},
		{"access.admins", func(c *Config) { c.Access.Admins = []string{"U123"} }, "access.admins"},
		{"access.allowed_users", func(c *Config) { c.Access.AllowedUsers = []string{"teams:1"} }, "access.allowed_users"},
		{"access.allowed_channels", func(c *Config) { c.Access.AllowedChannels = []string{"slack:"} }, "access.allowed_channels"},
		{"access.abort_by", func(c *Config) { c.Access.AbortBy = "owner" }, "access.abort_by"},
		{"access.answer_by", func(c *Config) { c.Access.AnswerBy = "anyone" }, "access.answer_by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatalf("Validate accepted the change")
			}
			var keys []string
			for _, line := range strings.Split(err.Error(), "\n") {
				key, _, _ := strings.Cut(line, ": ")
				keys = append(keys, key)
			}
			if diff := cmp.Diff([]string{tt.key}, keys); diff != "" {
				t.Errorf("keys named by %q (-want +got):\n%s", err, diff)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != tt.key {
				t.Errorf("error %v: want a *ConfigError with Key %q", err, tt.key)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"defaults", func(*Config) {}},
		{"slack socket with tokens", func(c *Config) {
			c.Slack.Enabled, c.Slack.BotToken, c.Slack.AppToken = true, "xoxb-1", "xapp-1"
		}},
		{"slack http with signing secret", func(c *Config) {
			c.Slack.Enabled, c.Slack.Mode, c.Slack.BotToken, c.Slack.SigningSecret = true, "http", "xoxb-1", "s"
		}},
		{"discord with token", func(c *Config) { c.Discord.Enabled, c.Discord.BotToken = true, "d" }},
		{"redis", func(c *Config) { c.Redis.URL = "redis://127.0.0.1:6379/0" }},
		{"redis tls", func(c *Config) { c.Redis.URL = "rediss://user:pw@redis.example:6380" }},
		{"redis socket", func(c *Config) { c.Redis.URL = "unix:///run/redis.sock" }},
		{"redis sentinel", func(c *Config) { c.Redis.URL = "redis+sentinel://:pw@s1:26379,s2:26379/mymaster/2" }},
		{"redis sentinel tls", func(c *Config) { c.Redis.URL = "rediss+sentinel://s1:26379/mymaster" }},
		{"redis cluster", func(c *Config) { c.Redis.ClusterAddrs = []string{"10.0.0.1:7000", "10.0.0.2:7000"} }},
		{"ja and Tokyo", func(c *Config) { c.Locale, c.Timezone = "ja", "Asia/Tokyo" }},
		{"UTC", func(c *Config) { c.Timezone = "UTC" }},
		{"exhausted at 1", func(c *Config) { c.Context.Exhausted = 1 }},
		{"compaction off", func(c *Config) { c.Context.Compaction = "off" }},
		{"compaction thresholds", func(c *Config) { c.Context.Mask, c.Context.Compact = 0.5, 0.75 }},
		{"access ids", func(c *Config) {
			c.Access.Admins = []string{"slack:U123", "discord-role:5678"}
			c.Access.AllowedUsers = []string{"slack-group:S1", "discord:1234"}
			c.Access.AllowedChannels = []string{"slack:C1", "discord:99"}
			c.Access.AbortBy, c.Access.AnswerBy = "anyone", "owner"
		}},
		{"admin addr and json logs", func(c *Config) {
			c.Admin.Addr, c.Log.Format, c.Log.Level = ":9090", "json", "debug"
		}},
		{"sandbox none", func(c *Config) { c.Tools.Bash.Sandbox = "none" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidateReportsAll(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Locale, cfg.Log.Level, cfg.Workers.Concurrency = "fr", "loud", 0
	err := cfg.Validate()
	for _, key := range []string{"locale", "log.level", "workers.concurrency"} {
		if err == nil || !strings.Contains(err.Error(), key+":") {
			t.Errorf("Validate = %v, want it to name %s", err, key)
		}
	}
}

func TestSecretNeverShown(t *testing.T) {
	const value = "sk-live-0123456789"
	cfg := DefaultConfig()
	cfg.LLM.APIKey = value
	cfg.Slack.BotToken = value
	cfg.Slack.AppToken = value
	cfg.Slack.SigningSecret = value
	cfg.Discord.BotToken = value
	cfg.API.Token = value
	s := Secret(value)

	render := map[string]func() string{
		"%v":          func() string { return fmt.Sprintf("%v", s) },
		"%+v":         func() string { return fmt.Sprintf("%+v", s) },
		"%#v":         func() string { return fmt.Sprintf("%#v", s) },
		"%s":          func() string { return fmt.Sprintf("%s", s) },
		"%q":          func() string { return fmt.Sprintf("%q", s) },
		"%x":          func() string { return fmt.Sprintf("%x", s) },
		"%d":          func() string { return fmt.Sprintf("%d", s) },
		"Sprint":      func() string { return fmt.Sprint(s) },
		"config %v":   func() string { return fmt.Sprintf("%v", cfg) },
		"config %+v":  func() string { return fmt.Sprintf("%+v", cfg) },
		"config %#v":  func() string { return fmt.Sprintf("%#v", cfg) },
		"pointer %+v": func() string { return fmt.Sprintf("%+v", &cfg) },
		"slog text": func() string {
			var b bytes.Buffer
			slog.New(slog.NewTextHandler(&b, nil)).Info("x", "key", s, "cfg", cfg, "llm", cfg.LLM)
			return b.String()
		},
		"slog json": func() string {
			var b bytes.Buffer
			slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "key", s, "cfg", cfg, "slack", cfg.Slack)
			return b.String()
		},
		"slog group": func() string {
			var b bytes.Buffer
			slog.New(slog.NewJSONHandler(&b, nil)).Info("x", slog.Group("g", "token", cfg.API.Token))
			return b.String()
		},
		"json": func() string {
			b, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		},
		"yaml": func() string {
			b, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		},
		"error": func() string { return fmt.Errorf("token %v: %w", s, errors.New("bad")).Error() },
	}
	for name, f := range render {
		t.Run(name, func(t *testing.T) {
			out := f()
			if strings.Contains(out, value) || strings.Contains(out, fmt.Sprintf("%x", value)) {
				t.Errorf("secret shown: %s", out)
			}
			if !strings.Contains(out, redacted) && !strings.Contains(out, fmt.Sprintf("%x", redacted)) {
				t.Errorf("output does not say %s: %s", redacted, out)
			}
		})
	}

	t.Run("empty", func(t *testing.T) {
		var empty Secret
		for _, got := range []string{empty.String(), fmt.Sprintf("%v", empty), empty.LogValue().String()} {
			if got != "" {
				t.Errorf("empty secret shows %q, want nothing", got)
			}
		}
	})
	t.Run("reveal", func(t *testing.T) {
		if got := s.Reveal(); got != value {
			t.Errorf("Reveal = %q, want %q", got, value)
		}
	})
}

// configKeys returns the dotted yaml keys of t, sections included.
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		if name == "" {
			continue
		}
		keys = append(keys, prefix+name)
		if f.Type.Kind() == reflect.Struct {
			keys = append(keys, configKeys(f.Type, prefix+name+".")...)
		}
	}
	return keys
}

// exampleKeys returns the dotted keys of a YAML mapping and whether each
// carries a comment (above it, beside the key or beside its value).
func exampleKeys(n *yaml.Node, prefix string, out map[string]bool) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := prefix + k.Value
		out[name] = k.HeadComment != "" || k.LineComment != "" || v.LineComment != ""
		exampleKeys(v, name+".", out)
	}
}

const examplePath = "../configs/baton.yaml"

// exampleConfig parses the example config into a YAML node tree.
func exampleConfig(t *testing.T) *yaml.Node {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatalf("%s: %v", examplePath, err)
	}
	return &root
}

func TestExampleDocumentsEveryKey(t *testing.T) {
	root := exampleConfig(t)
	documented := map[string]bool{}
	exampleKeys(root.Content[0], "", documented)
	keys := configKeys(reflect.TypeOf(Config{}), "")
	if len(keys) < 60 {
		t.Fatalf("only %d keys found by reflection; the walk is broken", len(keys))
	}
	for _, key := range keys {
		commented, ok := documented[key]
		switch {
		case !ok:
			t.Errorf("%s: key %s is not in the example config", examplePath, key)
		case !commented:
			t.Errorf("%s: key %s has no comment", examplePath, key)
		}
	}
}

// TestExampleEqualsDefaults: the example, copied to the directory Baton
// runs from (its paths resolve against the file's directory), is the
// defaults.
func TestExampleEqualsDefaults(t *testing.T) {
	got, err := LoadConfig(examplePath, mapEnv(nil))
	if err != nil {
		t.Fatalf("LoadConfig(%s): %v", examplePath, err)
	}
	dir, err := filepath.Abs(filepath.Dir(examplePath))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.resolvePaths(dir, dir, nil)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s differs from DefaultConfig() (-default +example):\n%s", examplePath, diff)
	}
}

func TestNewLogger(t *testing.T) {
	tests := []struct {
		format, level string
		wantDebug     bool
		check         func(string) bool
	}{
		{"text", "info", false, func(s string) bool { return strings.Contains(s, "msg=hello") }},
		{"text", "debug", true, func(s string) bool { return strings.Contains(s, "msg=hello") }},
		{"json", "warn", false, func(s string) bool { return s == "" }},
		{"json", "info", false, func(s string) bool {
			var m map[string]any
			return json.Unmarshal([]byte(s), &m) == nil && m["msg"] == "hello" && m["token"] == redacted
		}},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.level, func(t *testing.T) {
			var b bytes.Buffer
			logger, err := newLogger(LogConfig{Format: tt.format, Level: tt.level}, &b)
			if err != nil {
				t.Fatalf("newLogger: %v", err)
			}
			logger.Debug("debug line")
			if got := strings.Contains(b.String(), "debug line"); got != tt.wantDebug {
				t.Errorf("debug logged = %v, want %v: %q", got, tt.wantDebug, b.String())
			}
			b.Reset()
			logger.Info("hello", "token", Secret("xoxb-secret"))
			if out := strings.TrimSpace(b.String()); !tt.check(out) || strings.Contains(out, "xoxb-secret") {
				t.Errorf("unexpected output %q", out)
			}
		})
	}
	for _, bad := range []LogConfig{{Format: "xml", Level: "info"}, {Format: "text", Level: "loud"}} {
		if _, err := newLogger(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("newLogger(%+v) accepted", bad)
		}
	}
}
