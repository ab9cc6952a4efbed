package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// envSample returns a value for the key held in v that differs from v, as
// a variable would write it, and the value it must decode to.
func envSample(t *testing.T, key string, v reflect.Value) (string, any) {
	t.Helper()
	switch {
	case v.Type() == durationType:
		d := time.Duration(v.Int()) + 7*time.Second
		return d.String(), d
	case v.Type() == reflect.TypeOf(Secret("")):
		return "env-" + key, Secret("env-" + key)
	case v.Kind() == reflect.String:
		if slices.Contains(pathKeys, key) {
			return "/env/" + key, "/env/" + key
		}
		return "env-" + key, "env-" + key
	case v.Kind() == reflect.Bool:
		return strconv.FormatBool(!v.Bool()), !v.Bool()
	case v.Kind() == reflect.Float64:
		f := v.Float()/2 + 0.001
		return strconv.FormatFloat(f, 'g', -1, 64), f
	case v.CanInt():
		n := v.Int() + 7
		return strconv.FormatInt(n, 10), reflect.ValueOf(n).Convert(v.Type()).Interface()
	}
	t.Fatalf("%s: no sample for type %s", key, v.Type())
	return "", nil
}

// TestEnvEveryScalarKey: every scalar key is set by its variable
// BATON_<SECTION>_<KEY>, parsed as the key's type, over the file; the lists
// are read from the file only.
func TestEnvEveryScalarKey(t *testing.T) {
	path := writeConfig(t, "locale: ja\n")
	defaults := DefaultConfig()
	n := 0
	eachKey(reflect.ValueOf(&defaults).Elem(), "", func(key string, v reflect.Value) {
		vars := envVars(key)
		if v.Kind() == reflect.Slice || v.Kind() == reflect.Map {
			if vars != nil {
				t.Errorf("list or map %s has variables %v; they are file-only", key, vars)
			}
			return
		}
		n++
		want := envVar(key)
		if len(vars) == 0 || vars[0] != want {
			t.Errorf("%s: variables %v, want %s first", key, vars, want)
			return
		}
		raw, val := envSample(t, key, v)
		got, origins, err := loadConfig(path, mapEnv(map[string]string{want: raw}))
		if err != nil {
			t.Errorf("%s=%q: %v", want, raw, err)
			return
		}
		gv, _ := got.keyValue(key)
		if diff := cmp.Diff(val, gv.Interface()); diff != "" {
			t.Errorf("%s=%q: %s (-want +got):\n%s", want, raw, key, diff)
		}
		if o := origins.Of(key); o.Env != want {
			t.Errorf("%s=%q: origin of %s is %q, want the variable", want, raw, key, o)
		}
	})
	if n < 60 {
		t.Fatalf("only %d scalar keys walked; the walk is broken", n)
	}
}

// TestEnvVarsUnique: no two keys share a variable, and an alias is no
// key's BATON_ variable.
func TestEnvVarsUnique(t *testing.T) {
	owner := map[string]string{}
	for _, key := range leafKeys(reflect.TypeOf(Config{}), "") {
		for _, v := range envVars(key) {
			if other, ok := owner[v]; ok {
				t.Errorf("%s sets both %s and %s", v, other, key)
			}
			owner[v] = key
		}
	}
	if owner["BATON_CONFIG"] != "" {
		t.Errorf("BATON_CONFIG, the config file's variable, also sets %s", owner["BATON_CONFIG"])
	}
}

// TestEnvKinds: a variable of each kind overrides the file, and its
// conventional alias works where there is one.
func TestEnvKinds(t *testing.T) {
	path := writeConfig(t, `
slack:
  enabled: false
  mode: socket
  bot_token: file-bot
workers:
  concurrency: 2
queue:
  lease: 1m
context:
  warn: 0.6
llm:
  model: file-model
  api_key: file-key
`)
	tests := []struct {
		kind, name, val string
		get             func(Config) any
		want            any
	}{
		{"bool", "BATON_SLACK_ENABLED", "true", func(c Config) any { return c.Slack.Enabled }, true},
		{"string", "BATON_SLACK_MODE", "http", func(c Config) any { return c.Slack.Mode }, "http"},
		{"string", "BATON_LLM_MODEL", "llama3.1", func(c Config) any { return c.LLM.Model }, "llama3.1"},
		{"int", "BATON_WORKERS_CONCURRENCY", "9", func(c Config) any { return c.Workers.Concurrency }, 9},
		{"duration", "BATON_QUEUE_LEASE", "45s", func(c Config) any { return c.Queue.Lease }, 45 * time.Second},
		{"float", "BATON_CONTEXT_WARN", "0.5", func(c Config) any { return c.Context.Warn }, 0.5},
		{"secret", "BATON_SLACK_BOT_TOKEN", "xoxb-baton", func(c Config) any { return c.Slack.BotToken.Reveal() }, "xoxb-baton"},
		{"secret alias", "SLACK_BOT_TOKEN", "xoxb-alias", func(c Config) any { return c.Slack.BotToken.Reveal() }, "xoxb-alias"},
		{"nested", "BATON_TOOLS_BASH_SANDBOX", "none", func(c Config) any { return c.Tools.Bash.Sandbox }, "none"},
		{"discord bool", "BATON_DISCORD_ENABLED", "1", func(c Config) any { return c.Discord.Enabled }, true},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"/"+tt.name, func(t *testing.T) {
			got, err := LoadConfig(path, mapEnv(map[string]string{tt.name: tt.val}))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if diff := cmp.Diff(tt.want, tt.get(got)); diff != "" {
				t.Errorf("%s=%s (-want +got):\n%s", tt.name, tt.val, diff)
			}
		})
	}
}

// TestEnvPrecedence: the key's BATON_ variable wins over its alias, which
// wins over the file; an empty variable is unset.
func TestEnvPrecedence(t *testing.T) {
	path := writeConfig(t, "llm:\n  api_key: file-key\n")
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"file", nil, "file-key"},
		{"alias over file", map[string]string{"OPENAI_API_KEY": "alias-key"}, "alias-key"},
		{"BATON_ over alias", map[string]string{"OPENAI_API_KEY": "alias-key", "BATON_LLM_API_KEY": "baton-key"}, "baton-key"},
		{"empty BATON_ is unset", map[string]string{"OPENAI_API_KEY": "alias-key", "BATON_LLM_API_KEY": ""}, "alias-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadConfig(path, mapEnv(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if got.LLM.APIKey.Reveal() != tt.want {
				t.Errorf("llm.api_key = %q, want %q", got.LLM.APIKey.Reveal(), tt.want)
			}
		})
	}
}

// TestEnvBadValue: a variable that does not parse as its key's type stops
// Baton with exit 2, naming the variable, the key and what it wants.
func TestEnvBadValue(t *testing.T) {
	tests := []struct {
		name, val, want string
	}{
		{"BATON_SLACK_ENABLED", "yes please", `slack.enabled: BATON_SLACK_ENABLED: want true or false, got "yes please"`},
		{"BATON_WORKERS_CONCURRENCY", "many", `workers.concurrency: BATON_WORKERS_CONCURRENCY: want a whole number, got "many"`},
		{"BATON_WORKERS_SHUTDOWN_GRACE", "30", `workers.shutdown_grace: BATON_WORKERS_SHUTDOWN_GRACE: want a duration such as 30s, got "30"`},
		{"BATON_CONTEXT_WARN", "high", `context.warn: BATON_CONTEXT_WARN: want a number, got "high"`},
		{"BATON_TOOLS_SANDBOX_MAX_MEMORY_BYTES", "2GB", `tools.sandbox.max_memory_bytes: BATON_TOOLS_SANDBOX_MAX_MEMORY_BYTES: want a whole number, got "2GB"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig("", mapEnv(map[string]string{tt.name: tt.val}))
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadConfig = %v, want a *ConfigError with %q", err, tt.want)
			}
			code, _, stderr := runMain(t, map[string]string{tt.name: tt.val, "BATON_DATA_DIR": t.TempDir()}, "serve")
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("baton serve with %s=%q: exit %d, stderr %q; want %d with %q", tt.name, tt.val, code, stderr, exitUsage, tt.want)
			}
		})
	}
	// All bad variables at once.
	_, err := LoadConfig("", mapEnv(map[string]string{"BATON_SLACK_ENABLED": "x", "BATON_QUEUE_LEASE": "y"}))
	if err == nil || !strings.Contains(err.Error(), "BATON_SLACK_ENABLED") || !strings.Contains(err.Error(), "BATON_QUEUE_LEASE") {
		t.Errorf("two bad variables: %v, want both named", err)
	}
}

// TestEnvCarriageReturn: a .env file saved with Windows line endings hands
// Baton values ending in \r. The \r is removed (a token still works) and
// reported; any other control character is refused, naming the variable and
// never showing the value.
func TestEnvCarriageReturn(t *testing.T) {
	conf := writeConfig(t, "locale: ja\n")
	got, origins, err := loadConfig("", mapEnv(map[string]string{
		"SLACK_BOT_TOKEN":     "xoxb-crlf\r",
		"BATON_SLACK_ENABLED": "true\r",
		"BATON_CONFIG":        conf + "\r",
	}))
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if got.Slack.BotToken.Reveal() != "xoxb-crlf" || !got.Slack.Enabled || got.Locale != "ja" {
		t.Errorf("bot token %q, enabled %v, locale %q: want the values without \\r and the file read", got.Slack.BotToken.Reveal(), got.Slack.Enabled, got.Locale)
	}
	if o := origins.Of("slack.bot_token"); !o.CR || !strings.Contains(o.String(), `SLACK_BOT_TOKEN (its trailing \r removed)`) {
		t.Errorf("origin %+v (%s): want the variable and the removed \\r", o, o)
	}

	_, err = LoadConfig("", mapEnv(map[string]string{"SLACK_BOT_TOKEN": "xoxb-two\nlines"}))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "slack.bot_token" || !strings.Contains(err.Error(), "SLACK_BOT_TOKEN: the value holds a control character") {
		t.Errorf("a token with a newline: %v, want a *ConfigError naming SLACK_BOT_TOKEN", err)
	}
	if err != nil && strings.Contains(err.Error(), "xoxb-two") {
		t.Errorf("the error shows the token: %v", err)
	}
	code, _, stderr := runMain(t, map[string]string{"OPENAI_API_KEY": "sk-a\rb"}, "migrate")
	if code != exitUsage || !strings.Contains(stderr, "OPENAI_API_KEY") || strings.Contains(stderr, "sk-a") {
		t.Errorf("baton migrate with a \\r inside the key: exit %d, stderr %q; want 2 naming OPENAI_API_KEY without its value", code, stderr)
	}
}

// TestConfigPathMissing: a config path that does not exist stops every
// command with exit 2, naming the path and what named it.
func TestConfigPathMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "baton.yaml")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"--config", nil, []string{"config", "--config", missing}, missing + ": cannot read config (named by --config): no such file or directory"},
		{"BATON_CONFIG", map[string]string{"BATON_CONFIG": missing}, []string{"serve"}, missing + ": cannot read config (named by BATON_CONFIG): no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, tc.env, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, exitUsage, tc.want)
			}
		})
	}
}

// TestConfigCommand: `baton config` prints the effective configuration as
// YAML that decodes back to it, each key commented with its origin
// (default, FILE:LINE, environment VAR), and no secret's value.
func TestConfigCommand(t *testing.T) {
	path := writeConfig(t, "# mine\ndata_dir: state\nllm:\n  model: file-model\n  api_key: sk-from-file\naccess:\n  admins:\n    - slack:U1\n")
	env := map[string]string{
		"SLACK_BOT_TOKEN":           "xoxb-from-env",
		"BATON_WORKERS_CONCURRENCY": "7",
		"REDIS_URL":                 "redis://:hunter2@127.0.0.1:6379/0",
		"OPENAI_BASE_URL":           "http://user:pass@127.0.0.1:11434/v1",
	}
	code, out, stderr := runMain(t, env, "config", "--config", path)
	if code != 0 || stderr != "" {
		t.Fatalf("baton config: exit %d, stderr %q", code, stderr)
	}
	dir := filepath.Dir(path)
	for _, want := range []string{
		"# Config file: " + path + "\n",
		"data_dir: " + filepath.Join(dir, "state") + " # " + path + ":2\n",
		"  model: file-model # " + path + ":4\n",
		"  api_key: '[redacted]' # " + path + ":5\n",
		"  concurrency: 7 # environment BATON_WORKERS_CONCURRENCY\n",
		"  bot_token: '[redacted]' # environment SLACK_BOT_TOKEN\n",
		"  url: redis://[redacted]@127.0.0.1:6379/0 # environment REDIS_URL\n",
		"  base_url: http://[redacted]@127.0.0.1:11434/v1 # environment OPENAI_BASE_URL\n",
		"  admins: # " + path + ":7\n    - slack:U1\n",
		"  lease: 30s # default\n",
		"  retention: 720h # default\n",
		"  app_token: \"\" # default\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"sk-from-file", "xoxb-from-env", "hunter2", "pass@", "user:"} {
		if strings.Contains(out, secret) {
			t.Errorf("output shows %q:\n%s", secret, out)
		}
	}
	// The printout is a configuration: it decodes strictly to the same
	// values, but for the redacted ones.
	back := DefaultConfig()
	if err := decodeConfig([]byte(out), "printed", &back, nil); err != nil {
		t.Fatalf("the printout does not decode: %v\n%s", err, out)
	}
	want, err := LoadConfig(path, mapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	want.LLM.APIKey, want.Slack.BotToken = redacted, redacted
	want.Redis.URL, want.LLM.BaseURL = redactURL(want.Redis.URL), redactURL(want.LLM.BaseURL)
	if diff := cmp.Diff(want, back); diff != "" {
		t.Errorf("the printout decodes to another configuration (-want +got):\n%s", diff)
	}

	// Without a file: the defaults and the environment. An invalid
	// configuration is printed, then refused with exit 2.
	code, out, stderr = runMain(t, map[string]string{"BATON_SLACK_ENABLED": "true"}, "config")
	if code != exitUsage || !strings.Contains(out, "# No config file") || !strings.Contains(out, "enabled: true # environment BATON_SLACK_ENABLED") ||
		!strings.Contains(stderr, "slack.bot_token: is required") {
		t.Errorf("baton config with Slack on and no token: exit %d\nstdout:\n%s\nstderr: %s", code, out, stderr)
	}
	if code, _, stderr := runMain(t, nil, "config", "extra"); code != exitUsage || !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Errorf("baton config extra: exit %d, %s", code, stderr)
	}
}

// TestEnvExampleNamesKnownVariables: every variable .env.example offers is
// one Baton reads, and it offers the ones that turn the adapters on, so
// that `docker compose up` with a filled-in .env connects.
func TestEnvExampleNamesKnownVariables(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"BATON_CONFIG": true}
	for _, key := range leafKeys(reflect.TypeOf(Config{}), "") {
		for _, v := range envVars(key) {
			known[v] = true
		}
	}
	var offered []string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, ok := strings.Cut(line, "=")
		if !ok || !known[name] {
			t.Errorf(".env.example:%d: %q is no variable Baton reads", i+1, line)
		}
		offered = append(offered, name)
	}
	for _, want := range []string{"BATON_SLACK_ENABLED", "BATON_SLACK_MODE", "BATON_DISCORD_ENABLED", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "DISCORD_BOT_TOKEN", "OPENAI_API_KEY"} {
		if !slices.Contains(offered, want) {
			t.Errorf(".env.example does not offer %s", want)
		}
	}
}

// TestEnvAliasesDocumented: the example config lists every conventional
// variable with its key (the README's reference gets them from envVars).
func TestEnvAliasesDocumented(t *testing.T) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	for key, alias := range envAliases {
		if !strings.Contains(string(example), alias+" → "+key) {
			t.Errorf("%s does not say %s → %s", examplePath, alias, key)
		}
		if _, ok := configField(key); !ok {
			t.Errorf("alias %s names %s, which is no key", alias, key)
		}
	}
}
