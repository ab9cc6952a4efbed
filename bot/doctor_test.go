package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/sandbox/sandboxtest"
	"github.com/baton-bot/baton/queue/redistest"
)

// checkLine returns the line baton doctor printed for the check named
// name ("✓ store  …"), or "" when it printed none.
func checkLine(out, name string) string {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[1] == name {
			return sc.Text()
		}
	}
	return ""
}

// wantLine fails t unless doctor printed check name with the mark and
// every text of want on its line.
func wantLine(t *testing.T, out, mark, name string, want ...string) {
	t.Helper()
	line := checkLine(out, name)
	if !strings.HasPrefix(line, mark+" ") {
		t.Errorf("want %s %s, got line %q in:\n%s", mark, name, line, out)
		return
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Errorf("the %s line lacks %q: %s", name, w, line)
		}
	}
}

// scriptedModel answers like a model with tool calling: the tool when it
// is offered one, else text.
func scriptedModel(req llmtest.Request) llmtest.Step {
	if len(req.Tools) > 0 {
		return llmtest.Call(req.Tools[0].Name, `{"ok":true}`)
	}
	return llmtest.Text("OK")
}

// dotEnv reads a .env as `set -a; . ./.env; set +a` would into env.
func dotEnv(t *testing.T, path string, env map[string]string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		out[k] = strings.Trim(v, "'")
	}
	return out
}

// TestDoctorFreshClone is the first hour as a test: in an empty directory,
// `baton init --non-interactive` against the scripted model writes
// baton.yaml and .env and its doctor passes; `baton doctor` then prints ✓
// for the model, the store and the queue; with a wrong key it says the key
// was refused; with the model server stopped it prints ✗ with the URL and
// exits 1. The key is never printed.
func TestDoctorFreshClone(t *testing.T) {
	const key = "sk-fresh-clone-4f9a1c"
	dir := sandboxtest.Dir(t)
	t.Chdir(dir)
	srv := llmtest.NewServer(t, llmtest.WithAPIKey(key), llmtest.WithModels(llmtest.Model{ID: "baton-test", ContextLength: 200000}, llmtest.Model{ID: "other"}))
	srv.Handle(scriptedModel)
	secretFree := func(t *testing.T, outs ...string) {
		t.Helper()
		for _, o := range outs {
			if strings.Contains(o, key) {
				t.Errorf("the API key was printed:\n%s", o)
			}
		}
	}

	code, stdout, stderr := runMain(t, map[string]string{"MY_MODEL_KEY": key}, "init", "--non-interactive",
		"--provider", "other", "--base-url", srv.URL(), "--model", "baton-test", "--api-key-env", "MY_MODEL_KEY")
	if code != 0 {
		t.Fatalf("init: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	secretFree(t, stdout, stderr)
	for _, name := range []string{"llm.endpoint", "llm.model", "llm.tools", "llm.context_window", "store", "queue"} {
		wantLine(t, stdout, "✓", name)
	}
	fi, err := os.Stat(filepath.Join(dir, ".env"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf(".env: %v, mode %v; want 0600", err, fi.Mode())
	}
	env := dotEnv(t, filepath.Join(dir, ".env"), nil)
	if env["OPENAI_API_KEY"] != key {
		t.Fatalf(".env sets OPENAI_API_KEY=%q, want the key of --api-key-env", env["OPENAI_API_KEY"])
	}

	code, stdout, stderr = runMain(t, env, "doctor", "--config", "baton.yaml")
	if code != 0 {
		t.Fatalf("doctor: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	wantLine(t, stdout, "✓", "llm.model", "baton-test")
	wantLine(t, stdout, "✓", "store", filepath.Join(dir, "data", "baton.db"))
	wantLine(t, stdout, "✓", "queue", "in-process")
	if line := checkLine(stdout, "sandbox"); line == "" || strings.HasPrefix(line, "✗") {
		t.Errorf("sandbox under auto: %q, want ✓ (or ! where bubblewrap does not work)", line)
	}
	if !strings.Contains(stdout, "everything Baton needs works") {
		t.Errorf("no passing summary:\n%s", stdout)
	}
	secretFree(t, stdout, stderr)

	code, stdout, stderr = runMain(t, env, "doctor", "--config", "baton.yaml", "--json")
	var doc struct {
		OK     bool    `json:"ok"`
		Checks []check `json:"checks"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 0 || !doc.OK {
		t.Fatalf("doctor --json: exit %d, ok %v, %v\n%s", code, doc.OK, err, stdout)
	}
	status := map[string]checkStatus{}
	for _, c := range doc.Checks {
		status[c.Name] = c.Status
	}
	if status["llm.model"] != statusOK || status["store"] != statusOK || status["queue"] != statusOK || status["slack"] != statusSkip {
		t.Errorf("statuses %v", status)
	}

	wrong := dotEnv(t, filepath.Join(dir, ".env"), nil)
	wrong["OPENAI_API_KEY"] = "sk-wrong-key-000"
	code, stdout, stderr = runMain(t, wrong, "doctor", "--config", "baton.yaml")
	if code != 1 {
		t.Errorf("wrong key: exit %d, want 1", code)
	}
	wantLine(t, stdout, "✗", "llm.endpoint", "refused the key", "OPENAI_API_KEY")
	secretFree(t, stdout, stderr)
	if strings.Contains(stdout, "sk-wrong-key-000") {
		t.Errorf("the wrong key was printed:\n%s", stdout)
	}

	srv.Close()
	code, stdout, stderr = runMain(t, env, "doctor", "--config", "baton.yaml")
	if code != 1 {
		t.Errorf("model stopped: exit %d, want 1\n%s", code, stdout)
	}
	wantLine(t, stdout, "✗", "llm.endpoint", "nothing answers at "+srv.URL(), "OPENAI_BASE_URL")
	wantLine(t, stdout, "✓", "store")
	if !strings.Contains(stdout, "1 problem to fix") {
		t.Errorf("no failing summary:\n%s", stdout)
	}
	secretFree(t, stdout, stderr)
}

// doctorRun runs `baton doctor --config` with yaml as the file, the
// environment env and sandbox none (the sandbox is probed elsewhere).
func doctorRun(t *testing.T, yaml string, env map[string]string, args ...string) (int, string) {
	t.Helper()
	conf := writeConfig(t, "tools:\n  bash:\n    sandbox: none\n"+yaml)
	if env["BATON_DATA_DIR"] == "" {
		env["BATON_DATA_DIR"] = t.TempDir()
	}
	code, stdout, stderr := runMain(t, env, append([]string{"doctor", "--config", conf}, args...)...)
	if stderr != "" {
		t.Errorf("doctor wrote to stderr: %s", stderr)
	}
	return code, stdout
}

// TestDoctorModel: what the model checks say about endpoints that answer
// otherwise than a good one.
func TestDoctorModel(t *testing.T) {
	t.Run("no model list: a 1-token completion", func(t *testing.T) {
		srv := llmtest.NewServer(t)
		srv.Handle(scriptedModel)
		code, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		if code != 0 {
			t.Errorf("exit %d\n%s", code, out)
		}
		wantLine(t, out, "✓", "llm.endpoint", "lists no models", "1-token completion")
		wantLine(t, out, "✓", "llm.tools")
		wantLine(t, out, "-", "llm.context_window", "does not report")
		if reqs := srv.Requests(); len(reqs) != 2 || reqs[0].MaxTokens != 1 || len(reqs[1].Tools) != 1 {
			t.Errorf("requests: %+v; want a 1-token completion, then one with a tool", reqs)
		}
	})
	t.Run("an empty model list", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithModels())
		srv.Handle(scriptedModel)
		code, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL()})
		if code != 0 {
			t.Errorf("exit %d\n%s", code, out)
		}
		wantLine(t, out, "✓", "llm.endpoint", "1-token completion")
	})
	t.Run("Ollama lists llama3.1 as llama3.1:latest", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithModels(llmtest.Model{ID: "llama3.1:latest", ContextLength: 8192}))
		srv.Handle(scriptedModel)
		code, out := doctorRun(t, "llm:\n  context_window: 8000\n", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "llama3.1"})
		if code != 0 {
			t.Errorf("exit %d\n%s", code, out)
		}
		wantLine(t, out, "✓", "llm.model", "llama3.1")
		wantLine(t, out, "✓", "llm.context_window", "8000", "8192")
	})
	t.Run("a login page", func(t *testing.T) {
		page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<!DOCTYPE html><html><body>Sign in</body></html>")
		}))
		t.Cleanup(page.Close)
		code, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": page.URL + "/v1"})
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "llm.endpoint", "answered HTML, not an OpenAI-compatible API", "past any login page")
	})
	t.Run("no model list, wrong key", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithAPIKey("sk-right-123456"))
		code, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL(), "OPENAI_API_KEY": "sk-wrong-123456"})
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "llm.endpoint", "refused the key", "401")
	})
	t.Run("no key where one is needed", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithAPIKey("sk-right-123456"), llmtest.WithModels(llmtest.Model{ID: "m"}))
		_, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL()})
		wantLine(t, out, "✗", "llm.endpoint", "needs an API key", "llm.api_key is empty", "OPENAI_API_KEY")
	})
	t.Run("OpenAI without a key", func(t *testing.T) {
		code, out := doctorRun(t, "", map[string]string{})
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "llm.endpoint", "llm.api_key is empty", "OPENAI_API_KEY")
	})
	t.Run("model not found", func(t *testing.T) {
		var many []llmtest.Model
		for i := range 25 {
			many = append(many, llmtest.Model{ID: "model-" + string(rune('a'+i))})
		}
		srv := llmtest.NewServer(t, llmtest.WithModels(many...))
		_, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "gpt-nope"})
		wantLine(t, out, "✗", "llm.model", "model gpt-nope not found at "+srv.URL(), "model-a, model-b", "model-t and 5 more", "BATON_LLM_MODEL")
		if strings.Contains(checkLine(out, "llm.model"), "model-u") {
			t.Errorf("the list is not cut at 20: %s", checkLine(out, "llm.model"))
		}
	})
	t.Run("no tool calling", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithModels(llmtest.Model{ID: "m"}))
		srv.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Text("I would rather talk.") })
		code, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "llm.tools", "without calling the tool", "tool (function) calling")
		if reqs := srv.Requests(); len(reqs) != 1 || len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != doctorTool || reqs[0].ToolChoice != "required" {
			t.Errorf("requests %+v; want one offering %s with tool_choice required", reqs, doctorTool)
		}
	})
	t.Run("context window larger than the endpoint's", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithModels(llmtest.Model{ID: "m", ContextLength: 32768}))
		srv.Handle(scriptedModel)
		_, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		wantLine(t, out, "✗", "llm.context_window", "128000", "32768", "set llm.context_window to 32768 or less")
		_, out = doctorRun(t, "llm:\n  context_window: 32000\n", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		wantLine(t, out, "✓", "llm.context_window", "32000")
	})
}

// TestDoctorConfigAndDataDir: a broken config is one ✗ line (exit 1, not a
// usage error), a data_dir below its floor fails, a config file left
// unread is pointed out.
func TestDoctorConfigAndDataDir(t *testing.T) {
	bad := writeConfig(t, "llm:\n  temprature: 1\n")
	code, stdout, _ := runMain(t, nil, "doctor", "--config", bad)
	if code != 1 || len(strings.Split(strings.TrimSpace(stdout), "\n")) != 2 {
		t.Errorf("exit %d, want 1 with the config line and the summary:\n%s", code, stdout)
	}
	wantLine(t, stdout, "✗", "config", bad+":2: llm.temprature: unknown key")

	srv := llmtest.NewServer(t)
	srv.Handle(scriptedModel)
	code, out := doctorRun(t, "workspaces:\n  min_free_bytes: 4000000000000000000\n", map[string]string{"OPENAI_BASE_URL": srv.URL()})
	if code != 1 {
		t.Errorf("below the floor: exit %d", code)
	}
	wantLine(t, out, "✗", "data_dir", "below workspaces.min_free_bytes", "4.0 EB")

	code, stdout, _ = runMain(t, map[string]string{"BATON_DATA_DIR": t.TempDir()}, "doctor", "--bogus")
	if code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}

	t.Chdir(t.TempDir())
	mustWrite(t, "baton.yaml", "log:\n  level: warn\n")
	_, stdout, _ = runMain(t, map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": srv.URL()}, "doctor")
	wantLine(t, stdout, "!", "config", "./baton.yaml is here", "--config baton.yaml")
}

// TestDoctorRedis: Redis answering with noeviction passes, another
// maxmemory-policy warns (exit 0), no Redis fails with its address.
func TestDoctorRedis(t *testing.T) {
	rs := redistest.Start(t)
	llm := llmtest.NewServer(t)
	llm.Handle(scriptedModel)
	env := func() map[string]string {
		return map[string]string{"REDIS_URL": "redis://" + rs.Addr() + "/0", "OPENAI_BASE_URL": llm.URL()}
	}
	code, out := doctorRun(t, "", env())
	if code != 0 {
		t.Errorf("exit %d\n%s", code, out)
	}
	wantLine(t, out, "✓", "queue", "Redis at "+rs.Addr(), "noeviction")

	c := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer c.Close()
	if err := c.ConfigSet(context.Background(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	code, out = doctorRun(t, "", env())
	if code != 0 {
		t.Errorf("a warning failed doctor: exit %d", code)
	}
	wantLine(t, out, "!", "queue", "allkeys-lru", "--maxmemory-policy noeviction")

	rs.Stop()
	code, out = doctorRun(t, "", env())
	if code != 1 {
		t.Errorf("Redis down: exit %d", code)
	}
	wantLine(t, out, "✗", "queue", "Redis at "+rs.Addr()+" does not answer", "REDIS_URL")
}

// TestDoctorSlack checks the Slack app against the fake Web API: auth.test
// and the scopes it reports against the manifest's, the app token, the
// token prefixes naming their variables, HTTP mode's signing secret.
func TestDoctorSlack(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Handle(scriptedModel)
	want, err := manifestScopes()
	if err != nil || len(want) < 5 {
		t.Fatalf("manifest scopes %v, %v", want, err)
	}
	run := func(t *testing.T, f *slackfake.Server, mode, bot, app string) (int, string) {
		t.Helper()
		env := map[string]string{"OPENAI_BASE_URL": llm.URL(), "SLACK_BOT_TOKEN": bot, "SLACK_APP_TOKEN": app, "SLACK_SIGNING_SECRET": "sign-secret-1234567"}
		code, out := doctorRun(t, "slack:\n  enabled: true\n  mode: "+mode+"\n  api_url: "+f.URL()+"\n", env)
		for _, s := range []string{bot, app, "sign-secret-1234567"} {
			if s != "" && strings.Contains(out, s) {
				t.Errorf("a Slack secret was printed:\n%s", out)
			}
		}
		return code, out
	}
	t.Run("all good", func(t *testing.T) {
		f := slackfake.NewServer(t)
		f.SetScopes(append([]string{"extra:scope"}, want...)...)
		code, out := run(t, f, "socket", slackfake.BotToken, "xapp-1-test")
		if code != 0 {
			t.Errorf("exit %d\n%s", code, out)
		}
		wantLine(t, out, "✓", "slack.bot_token", "SLACK_BOT_TOKEN")
		wantLine(t, out, "✓", "slack.app_token", "SLACK_APP_TOKEN")
		wantLine(t, out, "✓", "slack.auth", "@baton", slackfake.Team)
		wantLine(t, out, "✓", "slack.scopes")
		wantLine(t, out, "✓", "slack.socket")
	})
	t.Run("missing scopes", func(t *testing.T) {
		f := slackfake.NewServer(t)
		f.SetScopes(want[2:]...)
		code, out := run(t, f, "socket", slackfake.BotToken, "xapp-1-test")
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "slack.scopes", "lacks 2 scopes", want[0]+", "+want[1], "reinstall")
	})
	t.Run("no scopes reported", func(t *testing.T) {
		code, out := run(t, slackfake.NewServer(t), "socket", slackfake.BotToken, "xapp-1-test")
		if code != 0 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "!", "slack.scopes", "did not report")
	})
	t.Run("swapped tokens", func(t *testing.T) {
		f := slackfake.NewServer(t)
		f.Fail("apps.connections.open", "not_allowed_token_type")
		code, out := run(t, f, "socket", "xapp-1-swapped", "xoxb-swapped")
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "slack.bot_token", "SLACK_BOT_TOKEN", "starts with xapp-", "look swapped")
		wantLine(t, out, "✗", "slack.app_token", "SLACK_APP_TOKEN", "starts with xoxb-")
		wantLine(t, out, "✗", "slack.socket", "not an app-level token")
	})
	t.Run("refused bot token", func(t *testing.T) {
		f := slackfake.NewServer(t)
		f.Fail("auth.test", "invalid_auth")
		_, out := run(t, f, "socket", "xoxb-revoked", "xapp-1-test")
		wantLine(t, out, "✗", "slack.auth", "refused SLACK_BOT_TOKEN", "invalid_auth")
	})
	t.Run("http mode", func(t *testing.T) {
		f := slackfake.NewServer(t)
		f.SetScopes(want...)
		code, out := run(t, f, "http", slackfake.BotToken, "")
		if code != 0 {
			t.Errorf("exit %d\n%s", code, out)
		}
		wantLine(t, out, "✓", "slack.signing_secret", "HTTPS")
		if checkLine(out, "slack.app_token") != "" || checkLine(out, "slack.socket") != "" {
			t.Errorf("the app token is checked in HTTP mode:\n%s", out)
		}
	})
}

// TestDoctorDiscord checks the Discord bot against the fake: the token,
// the application and its invite URL, the Message Content intent, the
// guild's command registration.
func TestDoctorDiscord(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Handle(scriptedModel)
	const token = "discord-token-abcdef123"
	run := func(t *testing.T, f *discordfake.Server, guild, tok string) (int, string) {
		t.Helper()
		code, out := doctorRun(t, "discord:\n  enabled: true\n  guild_id: \""+guild+"\"\n  api_url: "+f.APIURL()+"\n",
			map[string]string{"OPENAI_BASE_URL": llm.URL(), "DISCORD_BOT_TOKEN": tok})
		if strings.Contains(out, tok) {
			t.Errorf("the token was printed:\n%s", out)
		}
		return code, out
	}
	t.Run("all good", func(t *testing.T) {
		f := discordfake.New(t)
		f.RequireToken(token)
		code, out := run(t, f, discordfake.Guild, token)
		if code != 0 {
			t.Errorf("exit %d\n%s", code, out)
		}
		wantLine(t, out, "✓", "discord.token", "user id "+discordfake.Bot)
		wantLine(t, out, "✓", "discord.application", "application id "+discordfake.App, discordInvite(discordfake.App))
		wantLine(t, out, "✓", "discord.intent")
		wantLine(t, out, "✓", "discord.guild", discordfake.Guild)
	})
	t.Run("wrong token", func(t *testing.T) {
		f := discordfake.New(t)
		f.RequireToken(token)
		code, out := run(t, f, discordfake.Guild, "discord-token-wrong")
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "discord.token", "refused DISCORD_BOT_TOKEN", "Reset Token")
	})
	t.Run("intent off, another guild", func(t *testing.T) {
		f := discordfake.New(t)
		f.RefuseIntents()
		code, out := run(t, f, "777", token)
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "discord.intent", "Message Content intent is off", "Privileged Gateway Intents")
		wantLine(t, out, "✗", "discord.guild", "server 777", "Missing Access", discordInvite(discordfake.App))
	})
}

// TestDoctorStartChecks: serve, gateway, worker and run log the cheap
// checks' problems once at start, and nothing when there are none.
func TestDoctorStartChecks(t *testing.T) {
	n := newNewcomer(t)
	n.srv.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "done") })
	code, _, stderr := n.run("hello")
	if code != 0 || strings.Contains(stderr, "baton doctor") {
		t.Errorf("a healthy run: exit %d, stderr:\n%s", code, stderr)
	}
	n.conf = writeConfig(t, "log:\n  level: warn\ntools:\n  bash:\n    sandbox: none\nworkspaces:\n  min_free_bytes: 4000000000000000000\nslack:\n  enabled: true\n")
	// Swapped tokens are refused outright, naming both variables.
	n.env["SLACK_BOT_TOKEN"], n.env["SLACK_APP_TOKEN"] = "xapp-1-swapped", "xoxb-swapped"
	code, _, stderr = n.run("hello")
	if code != 2 || !strings.Contains(stderr, "SLACK_BOT_TOKEN starts with xapp-") || !strings.Contains(stderr, "SLACK_APP_TOKEN starts with xoxb-") {
		t.Errorf("swapped tokens: exit %d, want 2 naming both variables:\n%s", code, stderr)
	}
	// Tokens of no known kind are Slack's to judge: warned about at start.
	n.env["SLACK_BOT_TOKEN"], n.env["SLACK_APP_TOKEN"] = "proxy-bot-1", "proxy-app-1"
	code, _, stderr = n.run("hello")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"below workspaces.min_free_bytes", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "does not start with xoxb-", "3 problems at start"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if got := strings.Count(stderr, "below workspaces.min_free_bytes"); got != 1 {
		t.Errorf("the data_dir problem was told %d times, want once:\n%s", got, stderr)
	}
	for _, s := range []string{"xapp-1-swapped", "xoxb-swapped", "proxy-bot-1", "proxy-app-1"} {
		if strings.Contains(stderr, s) {
			t.Errorf("a token was logged:\n%s", stderr)
		}
	}
}

// TestDoctorTokenProblem: what a misplaced token is said to be, never more
// of it than its known prefix.
func TestDoctorTokenProblem(t *testing.T) {
	tests := []struct {
		tok, want, got string
	}{
		{"xoxb-1-abc", "xoxb-", ""},
		{"", "xoxb-", "is empty"},
		{"xapp-1-abc", "xoxb-", "starts with xapp-: that is an app-level token, not one that starts with xoxb-"},
		{"xoxp-1-abc", "xapp-", "starts with xoxp-: that is a user token, not one that starts with xapp-"},
		{"xoxb-1-abc\r", "xoxb-", "has spaces or a line ending around it (a .env saved with Windows line endings?)"},
		{"secret-abc", "xoxb-", "does not start with xoxb-"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.got, tokenProblem(Secret(tt.tok), tt.want)); diff != "" {
			t.Errorf("tokenProblem(%q, %q) (-want +got):\n%s", tt.tok, tt.want, diff)
		}
	}
}
