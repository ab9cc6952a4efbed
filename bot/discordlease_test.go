package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/queue/redistest"
)

// keptLeases are a process's leases that, once kill is set, are never
// released, as a killed process leaves them.
type keptLeases struct {
	core.LeaseStore
	kill atomic.Bool
}

func (k *keptLeases) ReleaseLease(ctx context.Context, name, owner string) error {
	if k.kill.Load() {
		return nil
	}
	return k.LeaseStore.ReleaseLease(ctx, name, owner)
}

// gatewayProc is a `baton gateway` running in-process.
type gatewayProc struct {
	*running
	leases *keptLeases
	base   string // http://addr of http.addr
	once   sync.Once
	code   int
}

// exit stops g and returns its exit code; calls after the first return
// the same.
func (g *gatewayProc) exit() int {
	g.once.Do(func() { g.stop(); g.code = <-g.done })
	return g.code
}

// get returns the status and body of path on g.
func (g *gatewayProc) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(g.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var heldGauge = regexp.MustCompile(`(?m)^baton_discord_connection_held (\d)$`)

// holds reads g's baton_discord_connection_held: 1 or 0.
func (g *gatewayProc) holds(t *testing.T) bool {
	t.Helper()
	_, body := g.get(t, "/metrics")
	m := heldGauge.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no baton_discord_connection_held:\n%s", body)
	}
	return m[1] == "1"
}

// waitUntil waits until cond holds, for up to d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDiscordGatewaysHoldOneConnection: two `baton gateway`s and a `baton
// worker` over one PostgreSQL store and one Redis, in front of one fake
// Discord. One gateway holds the gateway connection, the other stands by
// (ready, saying so); a message is answered once. The holder dies without
// releasing the lease: the other connects within 30 s and answers the next
// message once. A third gateway starts, the holder stops and releases:
// the third takes over before the lease could have run out. Never are two
// connections open at once.
func TestDiscordGatewaysHoldOneConnection(t *testing.T) {
	dbURL := postgresURL(t)
	rds := redistest.Start(t)
	f := discordfake.New(t)
	llm := llmtest.NewServer(t)
	ping := regexp.MustCompile(`ping-\d+`)
	llm.Handle(func(r llmtest.Request) llmtest.Step {
		for _, m := range r.Messages {
			if p := ping.FindString(m.Content); p != "" {
				return llmtest.Transition("COMPLETE", "pong"+strings.TrimPrefix(p, "ping"))
			}
		}
		return llmtest.Transition("COMPLETE", "no ping")
	})
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\ndiscord:\n  enabled: true\n  api_url: "+f.APIURL()+
		"\n  guild_id: \""+discordfake.Guild+"\"\ntools:\n  bash:\n    sandbox: none\n")
	env := func() map[string]string {
		return map[string]string{"BATON_DATA_DIR": t.TempDir(), "DATABASE_URL": dbURL, "REDIS_URL": "redis://" + rds.Addr() + "/0",
			"DISCORD_BOT_TOKEN": "discord-token", "OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "sk-x"}
	}
	start := func() *gatewayProc {
		t.Helper()
		m := NewMain()
		g := &gatewayProc{}
		m.leases = func(st core.LeaseStore) core.LeaseStore {
			g.leases = &keptLeases{LeaseStore: st}
			return g.leases
		}
		g.running = runBackgroundWith(t, m, env(), "gateway", "--config", conf)
		g.base = "http://" + g.logged(t, `baton gateway started" http=(\S+)`)
		t.Cleanup(func() { g.exit() })
		return g
	}
	worker := runBackground(t, env(), "worker", "--config", conf)
	t.Cleanup(func() { worker.stop(); <-worker.done })

	a, b := start(), start()
	waitUntil(t, 30*time.Second, "a gateway connects to Discord", func() bool { return f.Open() == 1 })
	waitUntil(t, 30*time.Second, "one gateway holds the connection", func() bool { return a.holds(t) != b.holds(t) })
	holder, standby := a, b
	if b.holds(t) {
		holder, standby = b, a
	}
	if code, body := standby.get(t, "/readyz"); code != http.StatusOK || !strings.Contains(body, "discord: standby") {
		t.Errorf("the standby's /readyz = %d %q, want 200 saying discord: standby", code, body)
	}
	waitUntil(t, 30*time.Second, "the holder is ready", func() bool { code, _ := holder.get(t, "/readyz"); return code == http.StatusOK })

	msgs := 0
	// say sends a mention in the text channel (a thread of its own) and
	// waits until its answer was posted and nothing is left to deliver;
	// then the thread must hold exactly one answer.
	say := func() {
		t.Helper()
		msgs++
		id := fmt.Sprint(8000 + msgs)
		f.Dispatch("MESSAGE_CREATE", map[string]any{
			"id": id, "channel_id": discordfake.Text, "guild_id": discordfake.Guild, "type": 0,
			"content":   fmt.Sprintf("<@%s> ping-%d", discordfake.Bot, msgs),
			"timestamp": time.Now().UTC().Format(time.RFC3339),
			"author":    map[string]any{"id": "42", "username": "user42"},
			"member":    map[string]any{"roles": []string{}},
			"mentions":  []any{map[string]any{"id": discordfake.Bot, "username": "baton", "bot": true}},
		})
		answer := fmt.Sprintf("pong-%d", msgs)
		answers := func() int {
			n := 0
			for _, p := range f.Posts() {
				if p.Channel == id && strings.Contains(p.Content, answer) {
					n++
				}
			}
			return n
		}
		waitUntil(t, 60*time.Second, "the answer "+answer, func() bool { return answers() > 0 })
		waitUntil(t, 30*time.Second, "the outbox delivered", func() bool { return pendingOutbox(t, dbURL) == 0 })
		if n := answers(); n != 1 {
			t.Errorf("%s was posted %d times in thread %s, want once", answer, n, id)
		}
	}
	say()

	// The holder dies: its lease stays until it runs out.
	holder.leases.kill.Store(true)
	died := time.Now()
	holder.exit()
	waitUntil(t, 30*time.Second, "the standby connects after the holder died", func() bool {
		total, _ := f.Connects()
		return total == 2 && f.Open() == 1
	})
	t.Logf("taken over %s after the holder died", time.Since(died).Round(time.Millisecond))
	waitUntil(t, 10*time.Second, "the standby says it holds the connection", func() bool { return standby.holds(t) })
	say()

	// A graceful stop releases the lease: a standby takes over at once,
	// well before the lease (15 s) would have run out.
	third := start()
	waitUntil(t, 30*time.Second, "the third gateway stands by", func() bool {
		code, body := third.get(t, "/readyz")
		return code == http.StatusOK && strings.Contains(body, "discord: standby")
	})
	stopped := time.Now()
	if code := standby.exit(); code != 0 {
		t.Errorf("the holder's graceful stop: exit %d", code)
	}
	waitUntil(t, 30*time.Second, "the third gateway connects", func() bool {
		total, _ := f.Connects()
		return total == 3 && f.Open() == 1
	})
	t.Logf("taken over %s after a graceful stop", time.Since(stopped).Round(time.Millisecond))
	if took := time.Since(stopped); took >= 15*time.Second {
		t.Errorf("the third gateway took over %s after a graceful stop; the released lease should not be waited for", took)
	}
	say()

	if _, most := f.Connects(); most != 1 {
		t.Errorf("%d gateway connections were open at once, want 1", most)
	}
}

// pendingOutbox counts the messages waiting for delivery in the store at
// dbURL.
func pendingOutbox(t *testing.T, dbURL string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'pending'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
