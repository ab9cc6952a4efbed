package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/baton-bot/baton/configs"
	"github.com/baton-bot/baton/core/llmtest"
)

// modelServer is a scripted model with tool calling, serving models.
func modelServer(t *testing.T, models ...string) *llmtest.Server {
	t.Helper()
	var list []llmtest.Model
	for _, m := range models {
		list = append(list, llmtest.Model{ID: m})
	}
	srv := llmtest.NewServer(t, llmtest.WithModels(list...))
	srv.Handle(scriptedModel)
	return srv
}

// TestInitBadFlags: a value baton init does not know is refused with exit
// 2, naming the flag, before anything is written.
func TestInitBadFlags(t *testing.T) {
	t.Chdir(t.TempDir())
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--slack", "rtm"}, "--slack: want socket, http or off"},
		{[]string{"--discord", "yes"}, "--discord: want on or off"},
		{[]string{"--provider", "anthropic"}, "--provider: want one of openai, ollama, vllm, openrouter, other"},
		{[]string{"--base-url", "localhost:11434"}, "--base-url: want an http:// or https:// URL"},
		{[]string{"--api-key-env", "MY KEY"}, "--api-key-env: want the name of an environment variable"},
		{[]string{"--api-key-env", "UNSET_KEY_VAR"}, "--api-key-env: $UNSET_KEY_VAR is empty or not set"},
		{[]string{"--discord-app-id", "baton"}, "--discord-app-id: want the Application ID"},
		{[]string{"--provider", "other"}, "--base-url is required with --provider other"},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		args := append([]string{"init", "--non-interactive"}, tt.args...)
		code, _, stderr := runMain(t, nil, args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("baton %s: exit %d, stderr %q; want 2 and %q", strings.Join(args, " "), code, stderr, tt.want)
		}
	}
	if _, err := os.Stat("baton.yaml"); err == nil {
		t.Error("a refused init wrote baton.yaml")
	}
	code, _, stderr := runMain(t, nil, "init")
	if code != 2 || !strings.Contains(stderr, "stdin is not a terminal: pass --non-interactive") {
		t.Errorf("init without a terminal: exit %d, stderr %q", code, stderr)
	}
}

// TestInitKeepsFiles: baton init never overwrites baton.yaml or .env
// without --force; with it, .env ends up 0600 whatever it was.
func TestInitKeepsFiles(t *testing.T) {
	t.Chdir(t.TempDir())
	srv := modelServer(t, "m")
	mustWrite(t, ".env", "OPENAI_API_KEY=mine\n")
	args := []string{"init", "--non-interactive", "--provider", "ollama", "--base-url", srv.URL(), "--model", "m"}
	code, _, stderr := runMain(t, nil, args...)
	if code != 2 || !strings.Contains(stderr, ".env exists: pass --force") {
		t.Errorf("exit %d, stderr %q; want a refusal naming .env and --force", code, stderr)
	}
	if b, _ := os.ReadFile(".env"); string(b) != "OPENAI_API_KEY=mine\n" {
		t.Errorf(".env was changed: %q", b)
	}
	if _, err := os.Stat("baton.yaml"); err == nil {
		t.Error("baton.yaml was written although .env exists")
	}
	code, stdout, stderr := runMain(t, nil, append(args, "--force")...)
	if code != 0 {
		t.Fatalf("--force: exit %d\n%s\n%s", code, stdout, stderr)
	}
	fi, err := os.Stat(".env")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf(".env mode %v (%v), want 0600", fi.Mode(), err)
	}
	cfg, err := LoadConfig("baton.yaml", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.BaseURL != srv.URL() || cfg.LLM.Model != "m" || cfg.Slack.Enabled || cfg.Discord.Enabled || filepath.Base(cfg.DataDir) != "data" {
		t.Errorf("baton.yaml holds %+v %v %v %s", cfg.LLM, cfg.Slack.Enabled, cfg.Discord.Enabled, cfg.DataDir)
	}
}

// TestInitPlatforms: with Slack and Discord on, baton init prints the
// manifest to paste and the invite URL with the application id, writes the
// tokens' variables to .env, and its doctor names the ones still empty.
func TestInitPlatforms(t *testing.T) {
	t.Chdir(t.TempDir())
	srv := modelServer(t, "m")
	code, stdout, stderr := runMain(t, nil, "init", "--non-interactive", "--provider", "other", "--base-url", srv.URL(), "--model", "m",
		"--slack", "http", "--discord", "on", "--discord-app-id", "123456789")
	if code != 1 {
		t.Errorf("exit %d, want 1 (the tokens are not set yet)\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"Create New App → From a manifest", "oauth_config:", "socket_mode_enabled: false", "uncomment the three URLs",
		"invite the bot with " + discordInvite("123456789"),
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	wantLine(t, stdout, "✗", "slack.bot_token", "SLACK_BOT_TOKEN", "is empty")
	wantLine(t, stdout, "✗", "slack.signing_secret", "SLACK_SIGNING_SECRET")
	wantLine(t, stdout, "✗", "discord.token", "DISCORD_BOT_TOKEN", "is empty")
	env, _ := os.ReadFile(".env")
	for _, v := range []string{"OPENAI_API_KEY=\n", "SLACK_BOT_TOKEN=\n", "SLACK_SIGNING_SECRET=\n", "DISCORD_BOT_TOKEN=\n"} {
		if !strings.Contains(string(env), v) {
			t.Errorf(".env lacks %q:\n%s", v, env)
		}
	}
	if strings.Contains(string(env), "SLACK_APP_TOKEN") {
		t.Errorf("HTTP mode's .env asks for an app token:\n%s", env)
	}

	// The invite URL asks for the permissions the README lists.
	readme, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`oauth2/authorize\?client_id=APPLICATION_ID&scope=bot%20applications.commands&permissions=(\d+)`).FindSubmatch(readme)
	if m == nil || string(m[1]) != discordPermissions {
		t.Errorf("the README's invite URL asks for permissions %q, baton init's for %s", m, discordPermissions)
	}
}

// moduleRoot is the module's root, absolute: tests here change the working
// directory.
var moduleRoot, _ = filepath.Abs(repoRoot)

// TestInitModelList: without --model, baton init takes the endpoint's
// only model, and refuses with the list cut to 20 when it has more.
func TestInitModelList(t *testing.T) {
	t.Chdir(t.TempDir())
	one := modelServer(t, "qwen-coder")
	code, stdout, stderr := runMain(t, nil, "init", "--non-interactive", "--provider", "vllm", "--base-url", one.URL())
	if code != 0 || !strings.Contains(stdout, "model qwen-coder, the one "+one.URL()+" serves") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("model-%02d", i))
	}
	many := modelServer(t, names...)
	t.Chdir(t.TempDir())
	code, _, stderr = runMain(t, nil, "init", "--non-interactive", "--provider", "vllm", "--base-url", many.URL())
	if code != 2 || !strings.Contains(stderr, "--model is required with --provider vllm") || !strings.Contains(stderr, "model-19 and 10 more") || strings.Contains(stderr, "model-20") {
		t.Errorf("exit %d, stderr %q; want 2 naming --model with 20 models and 10 more", code, stderr)
	}
}

// answerer is an interactive user at a terminal: when the program's
// output shows the next prompt, it types that prompt's answer.
type answerer struct {
	t   *testing.T
	ptm io.Writer

	mu      sync.Mutex
	all     strings.Builder // guarded by mu: everything shown
	unread  strings.Builder // guarded by mu: shown since the last answer
	answers [][2]string     // guarded by mu: prompt, answer, in order
}

func (a *answerer) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all.Write(p)
	a.unread.Write(p)
	for len(a.answers) > 0 && strings.Contains(a.unread.String(), a.answers[0][0]) {
		if _, err := io.WriteString(a.ptm, a.answers[0][1]+"\n"); err != nil {
			a.t.Errorf("type %q: %v", a.answers[0][1], err)
		}
		a.answers = a.answers[1:]
		a.unread.Reset()
	}
	return len(p), nil
}

func (a *answerer) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.all.String()
}

// TestInitInteractive answers baton init's questions on a terminal: a bad
// answer is asked again, the endpoint's models are offered, the key is
// read without echo and written to .env only.
func TestInitInteractive(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	const key = "sk-typed-at-the-prompt-77"
	srv := llmtest.NewServer(t, llmtest.WithAPIKey(key), llmtest.WithModels(llmtest.Model{ID: "alpha"}, llmtest.Model{ID: "beta"}))
	srv.Handle(scriptedModel)
	ptm, tty := openPTY(t)
	var echo syncBuffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&echo, ptm) // until the terminal closes
	}()
	a := &answerer{t: t, ptm: ptm, answers: [][2]string{
		{"Slack:", "maybe"}, {"want one of socket, http, off", "off"},
		{"Discord: on or off?", ""},
		{"Model endpoint:", "other"},
		{"Its API URL:", srv.URL()},
		{"API key", key},
		{"Model [alpha]:", "beta"},
		{"Data directory [./data]:", "./state"},
	}}
	var errOut syncBuffer
	m := NewMain()
	m.Stdin, m.Stdout, m.Stderr, m.Env = tty, a, &errOut, mapEnv(nil)
	code := m.Report(m.Run(context.Background(), []string{"init"}))
	out := a.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut.String())
	}
	if len(a.answers) != 0 {
		t.Errorf("questions not asked: %v", a.answers)
	}
	cfg, err := LoadConfig("baton.yaml", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.Model != "beta" || cfg.LLM.BaseURL != srv.URL() || cfg.DataDir != filepath.Join(dir, "state") || cfg.Slack.Enabled {
		t.Errorf("baton.yaml: %+v, data_dir %s", cfg.LLM, cfg.DataDir)
	}
	env, _ := os.ReadFile(".env")
	if !strings.Contains(string(env), "OPENAI_API_KEY="+key+"\n") {
		t.Errorf(".env lacks the key:\n%s", env)
	}
	if err := tty.Close(); err != nil {
		t.Fatal(err)
	}
	<-copied
	if shown := echo.String(); strings.Contains(shown, key) || !strings.Contains(shown, "beta") {
		t.Errorf("the terminal echoed %q; want the answers but not the key", shown)
	}
	if strings.Contains(out, key) || strings.Contains(errOut.String(), key) {
		t.Error("the key was printed")
	}
}

// TestInitManifestIsTheFile: the manifest baton init prints is the file
// in configs/.
func TestInitManifestIsTheFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot, "configs", "slack-app-manifest.yaml"))
	if err != nil || string(b) != string(configs.SlackManifest) {
		t.Errorf("configs.SlackManifest differs from configs/slack-app-manifest.yaml (%v)", err)
	}
}
