package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/sandbox/sandboxtest"
)

// runMain runs the program in-process as `baton args…` with the given
// environment and returns its exit code, stdout and stderr.
func runMain(t testing.TB, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := NewMain()
	m.Stdin = strings.NewReader("")
	m.Stdout, m.Stderr = &out, &errOut
	m.Env = mapEnv(env)
	m.Version = "1.2.3-test"
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	code = m.Report(m.Run(context.Background(), args))
	return code, out.String(), errOut.String()
}

// logPathLine is the line baton chat and baton run print about their log file.
var logPathLine = regexp.MustCompile(`(?m)^baton: the log goes to .*\n`)

func TestMainExitCodes(t *testing.T) {
	badKey := writeConfig(t, "llm:\n  model: x\n  temprature: 0.2\n")
	slackOn := writeConfig(t, "slack:\n  enabled: true\n")
	quiet := writeConfig(t, "log:\n  level: warn\n")
	data := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test"}
	// Commands that call the model start only with a key for OpenAI's
	// endpoint; a local one takes none.
	key := map[string]string{"OPENAI_API_KEY": "sk-test"}
	local := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}
	const noKey = "llm.api_key: is empty (set OPENAI_API_KEY): https://api.openai.com/v1 needs an API key"

	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantStderr []string
		wantStdout []string
	}{
		{"no command", nil, nil, 2, []string{"Usage: baton"}, nil},
		{"unknown command", nil, []string{"frobnicate"}, 2, []string{`unknown command "frobnicate"`}, nil},
		{"version", nil, []string{"version"}, 0, nil, []string{"baton 1.2.3-test\n", "revision ", runtime.Version()}},
		{"--version", nil, []string{"--version"}, 0, nil, []string{"1.2.3-test"}},
		{"version with argument", nil, []string{"version", "x"}, 2, []string{"unexpected argument"}, nil},
		{"help", nil, []string{"help"}, 0, nil, []string{"Usage: baton", "worker", "pieces"}},
		{"help command", nil, []string{"help", "run"}, 0, nil, []string{"--task N"}},
		{"help unknown", nil, []string{"help", "nope"}, 2, []string{`unknown command "nope"`}, nil},
		{"--help", nil, []string{"--help"}, 0, nil, []string{"Commands:"}},
		{"command -h", nil, []string{"serve", "-h"}, 0, nil, []string{"Usage: baton serve", "--config"}},
		{"bad flag", nil, []string{"serve", "--bogus"}, 2, []string{"flag provided but not defined: -bogus"}, nil},
		{"serve extra argument", nil, []string{"serve", "now"}, 2, []string{`unexpected argument "now"`}, nil},
		{"worker without redis", nil, []string{"worker"}, 2, []string{"baton worker: redis.url: must be set"}, nil},
		{"gateway without redis", nil, []string{"gateway"}, 2, []string{"baton gateway: redis.url: must be set"}, nil},
		{"chat ends with its input", key, []string{"chat", "--config", quiet, "--piece", "research", "--data-dir", sandboxtest.Dir(t)}, 0, nil, []string{"/quit leaves"}},
		{"chat unknown piece", key, []string{"chat", "--config", quiet, "--piece", "nope", "--data-dir", t.TempDir()}, 2, []string{"default_piece"}, nil},
		{"chat without a key", nil, []string{"chat", "--config", quiet, "--data-dir", t.TempDir()}, 2, []string{"baton chat: " + noKey}, nil},
		{"run without a key", nil, []string{"run", "--config", quiet, "say hello"}, 2, []string{"baton run: " + noKey}, nil},
		{"serve without a key", nil, []string{"serve", "--config", quiet}, 2, []string{"baton serve: " + noKey}, nil},
		{"worker without a key", map[string]string{"REDIS_URL": "redis://127.0.0.1:1/0"}, []string{"worker", "--config", quiet}, 2, []string{"baton worker: " + noKey}, nil},
		{"run on a local server without a key", local, []string{"run", "--config", quiet, "--piece", "nope", "say hello"}, 2, []string{`no piece named "nope"`}, nil},
		{"run unknown task", data, []string{"run", "--config", quiet, "--task", "3", "say hello"}, 2, []string{"there is no task #3"}, nil},
		{"run unknown piece", data, []string{"run", "--config", quiet, "--piece", "nope", "say hello"}, 2, []string{`no piece named "nope"`}, nil},
		{"run without instruction", nil, []string{"run", "--piece", "chat"}, 2, []string{"an instruction is required"}, nil},
		{"run bad task", nil, []string{"run", "--task", "x", "hi"}, 2, []string{"invalid value"}, nil},
		{"pieces without subcommand", nil, []string{"pieces"}, 2, []string{"validate [FILES] or list"}, nil},
		{"pieces unknown subcommand", nil, []string{"pieces", "fix"}, 2, []string{`unknown subcommand "fix"`}, nil},
		{"pieces validate missing file", nil, []string{"pieces", "validate", "--config", quiet, "a.yaml"}, 2, []string{"a.yaml"}, nil},
		{"pieces validate", nil, []string{"pieces", "validate", "--config", quiet}, 0, nil, []string{"3 pieces valid"}},
		{"pieces list", nil, []string{"pieces", "list", "--config", quiet}, 0, nil, []string{"chat", "plan-implement-verify", "research"}},
		{"migrate", data, []string{"migrate", "--config", quiet}, 0, nil, []string{"is up to date"}},
		{"unknown key", nil, []string{"serve", "--config", badKey}, 2, []string{badKey + ":3: llm.temprature: unknown key"}, nil},
		{"unknown key via BATON_CONFIG", map[string]string{"BATON_CONFIG": badKey}, []string{"migrate"}, 2, []string{badKey + ":3: llm.temprature: unknown key"}, nil},
		{"missing config file", nil, []string{"serve", "--config", "/nonexistent/baton.yaml"}, 2, []string{"/nonexistent/baton.yaml: cannot read config"}, nil},
		{"slack without tokens", nil, []string{"serve", "--config", slackOn}, 2, []string{"invalid configuration", "slack.bot_token: is required", "slack.app_token: is required"}, nil},
		{"invalid env value", map[string]string{"REDIS_URL": "localhost:6379"}, []string{"worker"}, 2, []string{"redis.url: must be redis://"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, tt.env, tt.args...)
			if code != tt.wantCode {
				t.Errorf("baton %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(tt.args, " "), code, tt.wantCode, stdout, stderr)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr)
				}
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout does not contain %q:\n%s", w, stdout)
				}
			}
			// The one line that says where the log goes (chat, run) is
			// all a success may print there.
			if tt.wantCode == 0 && logPathLine.ReplaceAllString(stderr, "") != "" {
				t.Errorf("stderr not empty on success: %s", stderr)
			}
		})
	}
}

func TestMainDataDirFlag(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	m := NewMain()
	m.Stdout, m.Stderr, m.Env = &out, &errOut, mapEnv(map[string]string{"BATON_DATA_DIR": "/from/env", "OPENAI_API_KEY": "sk-test"})
	m.Stdin = strings.NewReader("/quit\n")
	err := m.Run(context.Background(), []string{"chat", "--data-dir", dir})
	if code := ExitCode(err); code != 0 {
		t.Fatalf("exit %d (%v), want 0", code, err)
	}
	if m.Config.DataDir != dir {
		t.Errorf("data_dir = %q, want the flag's %q over BATON_DATA_DIR", m.Config.DataDir, dir)
	}
}

func TestMainLogsWithoutSecrets(t *testing.T) {
	cfg := writeConfig(t, "log:\n  level: debug\n  format: json\n")
	code, _, stderr := runMain(t, map[string]string{"OPENAI_API_KEY": "sk-topsecret", "REDIS_URL": "redis://:hunter2@127.0.0.1:1", "BATON_DATA_DIR": t.TempDir()}, "pieces", "list", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, stderr)
	}
	if !strings.Contains(stderr, `"msg":"configuration loaded"`) {
		t.Errorf("no JSON debug line on stderr:\n%s", stderr)
	}
	for _, secret := range []string{"sk-topsecret", "hunter2"} {
		if strings.Contains(stderr, secret) {
			t.Errorf("stderr shows %s:\n%s", secret, stderr)
		}
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{context.Canceled, 130},
		{&ConfigError{Key: "x", Msg: "bad"}, 2},
		{usageErr("bad"), 2},
		{notYet("serve"), 1},
		{context.DeadlineExceeded, 1},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// TestPiecesDirInsideWorkspacesRefused: a pieces_dir where agents write
// (under data_dir/workspaces/, directly or through a symlink) stops Baton at
// start, naming pieces_dir and data_dir.
func TestPiecesDirInsideWorkspacesRefused(t *testing.T) {
	data := t.TempDir()
	inside := filepath.Join(data, "workspaces", "1", "input")
	if err := os.MkdirAll(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "pieces")
	if err := os.Symlink(inside, link); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{
		"under workspaces/":    inside,
		"workspaces/ itself":   filepath.Join(data, "workspaces"),
		"a task not there yet": filepath.Join(data, "workspaces", "9", "input"),
		"a link into a task":   link,
		"written with ..":      filepath.Join(data, "x", "..", "workspaces", "2"),
	} {
		t.Run(name, func(t *testing.T) {
			cfg := writeConfig(t, "log:\n  level: warn\npieces_dir: "+dir+"\n")
			for _, args := range [][]string{{"pieces", "list", "--config", cfg}, {"chat", "--config", cfg}} {
				code, _, stderr := runMain(t, map[string]string{"BATON_DATA_DIR": data, "OPENAI_API_KEY": "sk-test"}, args...)
				if code == 0 || !strings.Contains(stderr, "pieces_dir") || !strings.Contains(stderr, "data_dir") {
					t.Errorf("baton %s: exit %d, stderr %q; want a refusal naming pieces_dir and data_dir", args[0], code, stderr)
				}
			}
		})
	}
	cfg := writeConfig(t, "log:\n  level: warn\npieces_dir: "+filepath.Join(data, "pieces")+"\n")
	if code, _, stderr := runMain(t, map[string]string{"BATON_DATA_DIR": data}, "pieces", "list", "--config", cfg); code != 0 {
		t.Errorf("pieces_dir beside the workspaces: exit %d\n%s", code, stderr)
	}
}

// TestPiecesNetworkIsTheOperators: a movement with network: true fails
// validation unless tools.bash.network grants it, naming the key. (Granted
// where pasta does not work, core/sandbox's TestNetworkWithoutPasta.)
func TestPiecesNetworkIsTheOperators(t *testing.T) {
	file := filepath.Join(t.TempDir(), "fetch.yaml")
	src := "name: fetch\nmovements:\n  - name: get\n    instruction: Fetch.\n    tools: [Bash]\n    network: true\n    next: [COMPLETE]\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	data := map[string]string{"BATON_DATA_DIR": sandboxtest.Dir(t)}
	deny := writeConfig(t, "log:\n  level: warn\n")
	code, _, stderr := runMain(t, data, "pieces", "validate", "--config", deny, file)
	if code != 2 || !strings.Contains(stderr, file+":6: ") || !strings.Contains(stderr, "tools.bash.network: deny; set it to allow_pieces") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	noPasta := writeConfig(t, "log:\n  level: error\ntools:\n  bash:\n    sandbox: none\n    network: allow_pieces\n")
	if code, _, stderr := runMain(t, data, "pieces", "validate", "--config", noPasta, file); code != 0 {
		t.Errorf("sandbox none, network allowed: exit %d\n%s", code, stderr)
	}
}
