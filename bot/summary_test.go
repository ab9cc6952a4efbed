package main

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestServeSlackFromEnvironment: with no config file, BATON_SLACK_ENABLED
// and the tokens in the environment start the Slack adapter, which answers
// a mention in the fake Slack; the start-up summary says so in one line,
// and a Discord token with the Discord adapter off is warned about, naming
// the variable to set.
func TestServeSlackFromEnvironment(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Script(llmtest.Transition("COMPLETE", "Configured from the environment."))
	f := slackfake.NewServer(t)
	data := t.TempDir()
	env := map[string]string{
		"BATON_SLACK_ENABLED":       "true",
		"BATON_SLACK_MODE":          "http",
		"BATON_SLACK_API_URL":       f.URL(),
		"SLACK_BOT_TOKEN":           slackfake.BotToken,
		"SLACK_SIGNING_SECRET":      slackfake.SigningSecret,
		"DISCORD_BOT_TOKEN":         "discord-secret-token",
		"BATON_HTTP_ADDR":           "127.0.0.1:0",
		"BATON_TOOLS_BASH_SANDBOX":  "none",
		"BATON_WORKERS_CONCURRENCY": "3",
		"BATON_LLM_MODEL":           "scripted-model",
		"BATON_DATA_DIR":            data,
		"OPENAI_BASE_URL":           llm.URL(),
		"OPENAI_API_KEY":            "sk-env-only",
	}
	r := runBackground(t, env, "serve")
	defer r.stop()
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	line := r.logged(t, `(?m)^(.*baton serve started.*)$`)
	for _, want := range []string{
		`adapters="slack (http mode)"`, "api=off", "queue=in-process",
		"store=" + filepath.Join(data, "baton.db"), "llm=" + llm.URL(), "model=scripted-model", "workers=3",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("the start-up line lacks %s:\n%s", want, line)
		}
	}
	warning := r.logged(t, `(?m)^(.*a Discord token is set but the Discord adapter is off.*)$`)
	if !strings.Contains(warning, "set BATON_DISCORD_ENABLED=true") || !strings.Contains(warning, "set=DISCORD_BOT_TOKEN") {
		t.Errorf("the warning does not name the variable to set and the token's:\n%s", warning)
	}
	if strings.Contains(r.stderr.String(), "a Slack token is set") {
		t.Errorf("a warning about Slack, which is on:\n%s", r.stderr.String())
	}

	const root = "1700000000.000100"
	req := slackfake.Sign(t, base, "/slack/events", slackfake.MentionEvent("Ev1", "U1", "<@UBATON> hello", root, ""), time.Now(), "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the event answered %d", resp.StatusCode)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !answered(f, root, "Configured from the environment.") {
		if time.Now().After(deadline) {
			t.Fatalf("no answer in the thread; calls %+v\n%s", f.Recorded(), r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.stop()
	if code := <-r.done; code != 0 {
		t.Errorf("serve exit %d:\n%s", code, r.stderr.String())
	}
	for _, secret := range []string{"discord-secret-token", "sk-env-only", slackfake.SigningSecret} {
		if strings.Contains(r.stderr.String(), secret) {
			t.Errorf("%s reached the log", secret)
		}
	}
}

// answered reports whether the fake Slack got text posted in the thread
// under root.
func answered(f *slackfake.Server, root, text string) bool {
	for _, said := range f.Said(root) {
		if strings.Contains(said, text) {
			return true
		}
	}
	return false
}

// TestServeSummary: the start-up line names the listen addresses, the
// task API, the queue and the model endpoint without their credentials;
// a .env with Windows line endings is warned about.
func TestServeSummary(t *testing.T) {
	env := map[string]string{
		"BATON_HTTP_ADDR":          "127.0.0.1:0",
		"BATON_ADMIN_ADDR":         "127.0.0.1:0",
		"BATON_API_TOKEN":          "api-secret\r",
		"BATON_TOOLS_BASH_SANDBOX": "none",
		"BATON_DATA_DIR":           t.TempDir(),
		"REDIS_URL":                "redis://:hunter2@127.0.0.1:1/0",
		"OPENAI_BASE_URL":          "http://user:llm-password@127.0.0.1:1/v1",
		"SLACK_APP_TOKEN":          "xapp-unused",
	}
	r := runBackground(t, env, "serve")
	defer r.stop()
	line := r.logged(t, `(?m)^(.*baton serve started.*)$`)
	admin := r.logged(t, `admin endpoints on" addr=(\S+)`)
	for _, want := range []string{
		regexp.MustCompile(`http=127\.0\.0\.1:\d+ `).FindString(line), "admin=" + admin, `adapters=none`, "api=on",
		"queue=redis://[redacted]@127.0.0.1:1/0", "llm=http://[redacted]@127.0.0.1:1/v1", "workers=4",
	} {
		if want == "" || !strings.Contains(line, want) {
			t.Errorf("the start-up line lacks %q:\n%s", want, line)
		}
	}
	log := r.stderr.String()
	if !strings.Contains(log, "a Slack token is set but the Slack adapter is off: set BATON_SLACK_ENABLED=true") || !strings.Contains(log, "set=SLACK_APP_TOKEN") {
		t.Errorf("no warning for the Slack token with Slack off:\n%s", log)
	}
	if !strings.Contains(log, "removed the carriage return that ended these variables") || !strings.Contains(log, "vars=BATON_API_TOKEN") {
		t.Errorf("no warning for the variable that ended in \\r:\n%s", log)
	}
	r.stop()
	<-r.done
	log = r.stderr.String()
	for _, secret := range []string{"hunter2", "llm-password", "api-secret", "xapp-unused"} {
		if strings.Contains(log, secret) {
			t.Errorf("%s reached the log:\n%s", secret, log)
		}
	}
}
