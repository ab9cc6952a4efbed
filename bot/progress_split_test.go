package main

import (
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/queue/redistest"
)

// TestProgressAcrossProcesses: `baton gateway` (Slack in HTTP mode) and
// `baton worker` run as separate processes of the binary, sharing Redis
// and the store; the job runs in the worker, and its progress still
// reaches the Slack thread as one streaming message — the tool call as a
// task update, the answer at its stop — delivered by the gateway.
func TestProgressAcrossProcesses(t *testing.T) {
	bin := buildStatic(t)
	srv := redistest.Start(t)
	slack := slackfake.NewServer(t)
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(
		llmtest.Call("Bash", `{"command":"echo across"}`),
		llmtest.Transition("COMPLETE", "Answer from the **worker**."),
	)
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nslack:\n  enabled: true\n  mode: http\n  api_url: "+slack.URL()+
		"\nworkers:\n  concurrency: 1\n  shutdown_grace: 1s\nqueue:\n  lease: 3s\n  heartbeat: 1s\ntools:\n  bash:\n    sandbox: none\n")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "REDIS_URL=redis://" + srv.Addr() + "/0",
		"BATON_DATA_DIR=" + t.TempDir(), "OPENAI_BASE_URL=" + llmSrv.URL(), "OPENAI_API_KEY=sk-x",
		"SLACK_BOT_TOKEN=" + slackfake.BotToken, "SLACK_SIGNING_SECRET=" + slackfake.SigningSecret}
	start := func(cmd string) *syncBuffer {
		var stderr syncBuffer
		c := exec.Command(bin, cmd, "--config", conf)
		c.Env, c.Stdout, c.Stderr = env, &stderr, &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = c.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = c.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = c.Process.Kill()
				<-exited
			}
			if t.Failed() {
				t.Logf("baton %s log:\n%s", cmd, stderr.String())
			}
		})
		return &stderr
	}
	gwLog := start("gateway")
	start("worker")
	var base string
	deadline := time.Now().Add(30 * time.Second)
	for base == "" {
		if m := regexp.MustCompile(`baton gateway started" http=(\S+)`).FindStringSubmatch(gwLog.String()); m != nil {
			base = "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not start:\n%s", gwLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	const root = "1700000000.000100"
	r := slackfake.Sign(t, base, "/slack/events", slackfake.MentionEvent("Ev1", "U1", "<@UBATON> run it", root, ""), time.Now(), "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("event answered %d", resp.StatusCode)
	}
	deadline = time.Now().Add(60 * time.Second)
	for len(slack.Recorded("chat.stopStream")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no chat.stopStream; calls: %+v", slack.Recorded())
		}
		time.Sleep(50 * time.Millisecond)
	}
	starts := slack.Recorded("chat.startStream")
	if len(starts) != 1 || starts[0].ThreadTS != root {
		t.Fatalf("chat.startStream calls %+v, want one in thread %s", starts, root)
	}
	var titles []string
	answer := ""
	for _, c := range slack.Recorded("chat.startStream", "chat.appendStream", "chat.stopStream") {
		for _, ch := range c.StreamChunks() {
			if ch.Type == "task_update" && strings.HasPrefix(ch.ID, "tool:") && ch.Status == "complete" {
				titles = append(titles, ch.Title)
			}
			if ch.Type == "markdown_text" && c.Method == "chat.stopStream" {
				answer += ch.Text
			}
		}
	}
	if !slices.Contains(titles, "Bash: echo across") {
		t.Errorf("completed tool updates %q, want Bash: echo across", titles)
	}
	if !strings.Contains(answer, "Answer from the *worker*.") {
		t.Errorf("chat.stopStream text %q, want the answer", answer)
	}
}
