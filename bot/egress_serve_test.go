package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/sandbox/sandboxtest"
)

// httpGet returns the status and body of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hostAddrs returns the host's own non-loopback IPv4 addresses.
func hostAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() {
				out = append(out, ip.Unmap().String())
			}
		}
	}
	return out
}

// TestEgressAdminListenerFromBash: a running `baton serve` with its admin
// listener on every interface (admin.addr 0.0.0.0, serving /healthz and
// /metrics) and egress allowing every host ("*"): Bash in bubblewrap
// reaches the admin listener neither through the proxy (by localhost, by
// 127.0.0.1, by the host's own addresses) nor directly, and each attempt
// through the proxy is a refused connection in the job's events.
func TestEgressAdminListenerFromBash(t *testing.T) {
	needBwrap(t)
	llm := llmtest.NewServer(t)
	data := sandboxtest.Dir(t)
	conf := writeConfig(t, "log:\n  level: info\nhttp:\n  addr: 127.0.0.1:0\nadmin:\n  addr: 0.0.0.0:0\n"+
		"tools:\n  bash:\n    sandbox: bwrap\n    timeout: 60s\negress:\n  allow: [\"*\"]\n")
	env := map[string]string{"BATON_DATA_DIR": data, "OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken"}
	r := runBackground(t, env, "serve", "--config", conf)
	defer r.stop()
	_, port, err := net.SplitHostPort(r.logged(t, `admin endpoints on" addr=(\S+)`))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)

	// The admin listener answers on the host, at every address tried.
	hosts := append([]string{"127.0.0.1"}, hostAddrs(t)...)
	for _, h := range hosts {
		code, body := httpGet(t, "http://"+net.JoinHostPort(h, port)+"/healthz")
		if code != 200 || !strings.Contains(body, "ok") {
			t.Fatalf("the admin listener at %s answers %d %q on the host", h, code, body)
		}
	}
	const get = "curl -sS --max-time 20 -w ' status=%{http_code}\\n' "
	var proxied, direct strings.Builder
	proxied.WriteString(get + "http://localhost:" + port + "/healthz; " + get + "http://localhost:" + port + "/metrics")
	for _, h := range hosts {
		proxied.WriteString("; " + get + "http://" + net.JoinHostPort(h, port) + "/metrics")
		direct.WriteString("(exec 3<>/dev/tcp/" + h + "/" + port + ") 2>/dev/null && echo REACHED-" + h + "; " +
			"curl -sS --max-time 5 --noproxy '*' http://" + net.JoinHostPort(h, port) + "/healthz && echo REACHED-CURL-" + h + "; ")
	}
	direct.WriteString("echo probed")
	llm.Script(bashStep(proxied.String()), bashStep(direct.String()), llmtest.Transition("COMPLETE", "Probed the admin listener."))
	task := createTask(t, base, "t0ken", "probe the admin listener")
	waitAnswer(t, base, "t0ken", task, "Probed the admin listener.", time.Now().Add(60*time.Second))

	res := toolResults(llm)
	if len(res) != 2 {
		t.Fatalf("%d tool results, want 2: %q", len(res), res)
	}
	if n := strings.Count(res[0], "status=403"); n != 2+len(hosts) || strings.Contains(res[0], "baton_") || strings.Contains(res[0], "status=200") ||
		strings.Count(res[0], "localhost resolves to 127.0.0.1") != 2 {
		t.Errorf("the admin listener through the proxy (%d refusals, want %d): %q", n, 2+len(hosts), res[0])
	}
	if strings.Contains(res[1], "REACHED") || !strings.Contains(res[1], "probed") {
		t.Errorf("the admin listener directly: %q", res[1])
	}
	evs := jobEvents(t, data, task, core.EventEgress)
	if len(evs) != 2+len(hosts) {
		t.Fatalf("egress events:\n%s", strings.Join(evs, "\n"))
	}
	for _, e := range evs {
		if c, ok := core.ParseConnection(e); !ok || c.Outcome != "denied" || c.Port == 0 {
			t.Errorf("an egress event of an attempt on the admin listener: %q", e)
		}
	}
}

// slackEgress is a `baton serve` in front of the fake Slack, Bash in
// bubblewrap behind an egress proxy with default ask, the scripted model
// answering each thread from its own script.
type slackEgress struct {
	t     *testing.T
	f     *slackfake.Server
	llm   *llmtest.Server
	base  string
	data  string
	runOf *running
}

// newSlackEgress starts it; scripts maps a word of a request to the steps
// the model takes for it, one per tool result the request carries.
func newSlackEgress(t *testing.T, scripts map[string][]llmtest.Step) *slackEgress {
	t.Helper()
	needBwrap(t)
	llm := llmtest.NewServer(t)
	llm.Handle(func(r llmtest.Request) llmtest.Step {
		var results int
		var word string
		for _, m := range r.Messages {
			if m.Role == "tool" {
				results++
			}
			for w := range scripts {
				if m.Role == "user" && strings.Contains(m.Text(), w) {
					word = w
				}
			}
		}
		if steps := scripts[word]; results < len(steps) {
			return steps[results]
		}
		return llmtest.Transition("COMPLETE", "unscripted")
	})
	f := slackfake.NewServer(t)
	data := sandboxtest.Dir(t)
	// An entry naming the loopback address (at another port) lets the
	// local servers be asked about at all.
	conf := writeConfig(t, "log:\n  level: info\nhttp:\n  addr: 127.0.0.1:0\nslack:\n  enabled: true\n  mode: http\n  api_url: "+f.URL()+
		"\ntools:\n  bash:\n    sandbox: bwrap\n    timeout: 60s\negress:\n  default: ask\n  allow: [\"127.0.0.1:1\"]\n")
	env := map[string]string{"BATON_DATA_DIR": data, "OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "sk-x",
		"SLACK_BOT_TOKEN": slackfake.BotToken, "SLACK_SIGNING_SECRET": slackfake.SigningSecret}
	r := runBackground(t, env, "serve", "--config", conf)
	t.Cleanup(func() { r.stop(); <-r.done })
	return &slackEgress{t: t, f: f, llm: llm, base: "http://" + r.logged(t, `baton serve started" http=(\S+)`), data: data, runOf: r}
}

// post sends a signed event to Baton's Slack endpoint.
func (s *slackEgress) post(event string) {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(slackfake.Sign(s.t, s.base, "/slack/events", event, time.Now(), "application/json"))
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("the event answered %d", resp.StatusCode)
	}
}

// approvals returns the messages with the approval buttons posted in
// root's thread, once there are n.
func (s *slackEgress) approvals(root string, n int) []slackfake.Call {
	s.t.Helper()
	var got []slackfake.Call
	waitUntil(s.t, 60*time.Second, fmt.Sprintf("%d approval messages in thread %s", n, root), func() bool {
		got = nil
		for _, c := range s.f.Recorded("chat.postMessage") {
			if b := c.Buttons(); c.ThreadTS == root && len(b) == 3 && strings.HasPrefix(b[0].Value, "approve:") {
				got = append(got, c)
			}
		}
		return len(got) >= n
	})
	return got
}

// click clicks msg's button whose value starts with verb, as user U1.
func (s *slackEgress) click(msg slackfake.Call, verb string) {
	s.t.Helper()
	for _, b := range msg.Buttons() {
		if strings.HasPrefix(b.Value, verb+":") {
			resp, err := http.DefaultClient.Do(slackfake.Interaction(s.t, s.base, slackfake.BlockActions(b.Value, "U1", msg.Channel, msg.Posted, msg.ThreadTS), time.Now()))
			if err != nil {
				s.t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				s.t.Fatalf("the %s click answered %d", verb, resp.StatusCode)
			}
			return
		}
	}
	s.t.Fatalf("no %s button on %+v", verb, msg.Buttons())
}

// answered waits for text in root's thread.
func (s *slackEgress) answered(root, text string) {
	s.t.Helper()
	waitUntil(s.t, 60*time.Second, "the thread "+root+" saying "+text, func() bool { return answered(s.f, root, text) })
}

// results returns the tool results the model was last sent for word's
// thread, in order.
func (s *slackEgress) results(word string) []string {
	var out []string
	for _, r := range s.llm.Requests() {
		var mine bool
		var res []string
		for _, m := range r.Messages {
			if m.Role == "user" && strings.Contains(m.Text(), word) {
				mine = true
			}
			if m.Role == "tool" {
				res = append(res, m.Text())
			}
		}
		if mine && len(res) >= len(out) {
			out = res
		}
	}
	return out
}

// told reports whether the model was told text in word's thread.
func (s *slackEgress) told(word, text string) bool {
	for _, r := range s.llm.Requests() {
		var mine, has bool
		for _, m := range r.Messages {
			mine = mine || (m.Role == "user" && strings.Contains(m.Text(), word))
			has = has || (m.Role == "user" && strings.Contains(m.Text(), text))
		}
		if mine && has {
			return true
		}
	}
	return false
}

// TestEgressAskInSlack: `baton serve` in front of the fake Slack, Bash in
// bubblewrap behind the egress proxy with default ask, the scripted model
// driving curl. The first connection to an unlisted host posts an
// approval with its buttons in the thread and the command's output says a
// person was asked. Approve (the button): the command run again gets the
// host's nonce, and the host stays approved for the rest of the job,
// across the job's next park for another host. Deny: the command run
// again fails cleanly, the proxy's refusal in Bash's output. Always allow
// for this channel: the job gets through, and a later job in the channel
// reaches the host without an approval. !status lists the job's
// connections by host, outcome and bytes.
func TestEgressAskInSlack(t *testing.T) {
	a, _ := hostServer(t, "nonce-a-31f")
	b, _ := hostServer(t, "nonce-b-8c0")
	c, cHits := hostServer(t, "nonce-c-5d7")
	d, _ := hostServer(t, "nonce-d-e24")
	curl := func(hosts ...string) llmtest.Step {
		var cmd []string
		for _, h := range hosts {
			cmd = append(cmd, "curl -sS --max-time 20 -w ' status=%{http_code}\\n' http://"+h+"/")
		}
		return bashStep(strings.Join(cmd, "; "))
	}
	s := newSlackEgress(t, map[string][]llmtest.Step{
		"approve-word": {curl(a), curl(a, b), curl(a, b), llmtest.Transition("COMPLETE", "approve-done")},
		"deny-word":    {curl(c), curl(c), llmtest.Transition("COMPLETE", "deny-done")},
		"always-word":  {curl(d), curl(d), llmtest.Transition("COMPLETE", "always-done")},
		"later-word":   {curl(d), llmtest.Transition("COMPLETE", "later-done")},
	})
	const approveRoot, denyRoot, alwaysRoot, laterRoot = "1700000000.000100", "1700000000.000200", "1700000000.000300", "1700000000.000400"

	t.Run("approve", func(t *testing.T) {
		s.post(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> fetch approve-word", approveRoot, ""))
		first := s.approvals(approveRoot, 1)[0]
		if !strings.Contains(first.Text, a) {
			t.Errorf("the approval message does not name %s: %q", a, first.Text)
		}
		s.click(first, "approve")
		second := s.approvals(approveRoot, 2)[1]
		if !strings.Contains(second.Text, b) {
			t.Errorf("the second approval message does not name %s: %q", b, second.Text)
		}
		s.click(second, "approve")
		s.answered(approveRoot, "approve-done")
		res := s.results("approve-word")
		if len(res) != 3 {
			t.Fatalf("%d tool results, want 3: %q", len(res), res)
		}
		if !strings.Contains(res[0], "needs a person's approval") || !strings.Contains(res[0], "status=403") || strings.Contains(res[0], "nonce") {
			t.Errorf("before the approval: %q", res[0])
		}
		if !strings.Contains(res[1], "nonce-a-31f") || !strings.Contains(res[1], b+" needs a person's approval") {
			t.Errorf("after approving %s: %q", a, res[1])
		}
		if !strings.Contains(res[2], "nonce-a-31f") || !strings.Contains(res[2], "nonce-b-8c0") || strings.Contains(res[2], "status=403") {
			t.Errorf("after approving %s too (the job parked again): %q", b, res[2])
		}
		if n := len(s.approvals(approveRoot, 2)); n != 2 {
			t.Errorf("%d approval messages, want 2: %s was asked about again", n, a)
		}
		// !status lists the job's connections.
		s.post(slackfake.MessageEvent("Ev1s", "U1", "!status", "1700000000.000150", approveRoot))
		var status string
		waitUntil(t, 60*time.Second, "the status in the thread", func() bool {
			for _, m := range s.f.Recorded("chat.postMessage") {
				if m.ThreadTS == approveRoot && strings.Contains(m.Text, "Network:") {
					status = m.Text
					return true
				}
			}
			return false
		})
		if !strings.Contains(status, "Network: 5 connections (3 allowed, 0 denied, 2 asked)") ||
			!regexp.MustCompile("`"+regexp.QuoteMeta(a)+"` allowed ×2, [1-9][0-9]* B up, [1-9][0-9]* B down").MatchString(status) ||
			!strings.Contains(status, "`"+a+"` asked ×1, 0 B up, 0 B down") || !strings.Contains(status, "`"+b+"` asked ×1") ||
			!regexp.MustCompile("`"+regexp.QuoteMeta(b)+"` allowed ×1, [1-9][0-9]* B up, [1-9][0-9]* B down").MatchString(status) {
			t.Errorf("!status: %q", status)
		}
	})

	t.Run("deny", func(t *testing.T) {
		s.post(slackfake.MentionEvent("Ev2", "U1", "<@UBATON> fetch deny-word", denyRoot, ""))
		s.click(s.approvals(denyRoot, 1)[0], "deny")
		s.answered(denyRoot, "deny-done")
		res := s.results("deny-word")
		if len(res) != 2 {
			t.Fatalf("%d tool results, want 2: %q", len(res), res)
		}
		if !strings.Contains(res[1], "Baton egress proxy: a person denied reaching "+c+" for this job") ||
			!strings.Contains(res[1], "status=403") || strings.Contains(res[1], "nonce") || cHits.Load() != 0 {
			t.Errorf("the command run again after Deny: %q (the host's requests: %d)", res[1], cHits.Load())
		}
		if !s.told("deny-word", "denied reaching "+c) {
			t.Error("the model was not told of the denial")
		}
	})

	t.Run("always allow", func(t *testing.T) {
		s.post(slackfake.MentionEvent("Ev3", "U1", "<@UBATON> fetch always-word", alwaysRoot, ""))
		s.click(s.approvals(alwaysRoot, 1)[0], "always")
		s.answered(alwaysRoot, "always-done")
		if res := s.results("always-word"); len(res) != 2 || !strings.Contains(res[1], "nonce-d-e24") {
			t.Errorf("after Always allow: %q", res)
		}
		// A later job in the channel: through at once, nobody asked.
		s.post(slackfake.MentionEvent("Ev4", "U1", "<@UBATON> fetch later-word", laterRoot, ""))
		s.answered(laterRoot, "later-done")
		if res := s.results("later-word"); len(res) != 1 || !strings.Contains(res[0], "nonce-d-e24") {
			t.Errorf("a later job in the channel: %q", res)
		}
		for _, m := range s.f.Recorded("chat.postMessage") {
			if m.ThreadTS == laterRoot && len(m.Buttons()) == 3 {
				t.Errorf("an approval was asked in the later job: %q", m.Text)
			}
		}
	})
}
