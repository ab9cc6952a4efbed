//go:build linux

package manyhosts

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core/llmtest"
)

// The run's shape: roots threads, every followEvery-th of them answered
// with a second mention once its first answer is posted, so that
// roots + roots/followEvery distinct events reach the gateways; each
// event is sent to both gateways with probability dupShare.
const (
	roots       = 150
	followEvery = 3
	dupShare    = 0.2
	// channels spreads the threads over channels: Baton posts at most
	// one message a second in a Slack channel.
	channels = 25
)

// channelOf is the channel of thread i.
func channelOf(i int) string { return fmt.Sprintf("C%03d", i%channels) }

// TestManyHosts runs Baton as five processes of the built binary — two
// `baton gateway`s (Slack in HTTP mode) and three `baton worker`s, each
// with its own data_dir, sharing PostgreSQL, Redis and one workspace
// root — and sends them 200 signed Slack events (the scripted model
// answering each job with a Write and a transition after a pause), each
// to one gateway at random, a fifth of them to both. Mid-run a worker and
// a gateway are killed with SIGKILL (and started again), PostgreSQL is
// restarted, and, on isolated hosts, one worker's link is cut for 20 s
// while it is in a job. Then: one task per thread, one job per distinct
// event, every job finished once, every answer posted once, every
// acknowledged event handled, nothing left in the outbox, and no job run
// by two attempts at once (from the jobs' events).
func TestManyHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five Baton processes, PostgreSQL and Redis for a few minutes")
	}
	nw := newNetwork(t)
	pg := startPostgres(t, nw.addHost(t, "pg"))
	redisURL := startRedis(t, nw.addHost(t, "redis"))
	bin := buildBaton(t)

	slack := slackfake.NewServer(t)
	llm := llmtest.NewServer(t)
	llm.Handle(func(req llmtest.Request) llmtest.Step {
		step, ok := job(req)
		if !ok {
			t.Errorf("a model request names no event: %.2000s", req.Raw)
		}
		return step
	})
	slackAPI := forward(t, nw.gateway, hostOf(t, slack.URL()))
	model := forward(t, nw.gateway, hostOf(t, llm.URL()))

	dir := t.TempDir()
	shared := filepath.Join(dir, "workspaces") // the one directory all processes share
	must(t, os.MkdirAll(filepath.Join(dir, "pieces"), 0o755))
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + os.TempDir(),
		"OPENAI_BASE_URL=http://" + model.addr() + "/v1", "OPENAI_API_KEY=sk-many",
		"SLACK_BOT_TOKEN=" + slackfake.BotToken, "SLACK_SIGNING_SECRET=" + slackfake.SigningSecret,
		"DATABASE_URL=" + pg.url(), "REDIS_URL=" + redisURL,
	}
	newProc := func(name, cmd string) *proc {
		h := nw.addHost(t, name)
		data := filepath.Join(dir, name)
		conf := filepath.Join(dir, name+".yaml")
		must(t, os.WriteFile(conf, fmt.Appendf(nil, `data_dir: %s
pieces_dir: %s
workspaces:
  root: %s
http:
  addr: %s:0
slack:
  enabled: true
  mode: http
  api_url: %s
workers:
  concurrency: 4
queue:
  lease: 8s
  heartbeat: 2s
tools:
  bash:
    sandbox: none
log:
  format: text
  level: info
`, data, filepath.Join(dir, "pieces"), shared, h.ip, strings.Replace(slack.URL(), hostOf(t, slack.URL()), slackAPI.addr(), 1)), 0o600))
		return &proc{name: name, h: h, args: []string{cmd, "--config", conf}, env: env, log: filepath.Join(dir, name+".log")}
	}
	gateways := []*proc{newProc("g1", "gateway"), newProc("g2", "gateway")}
	workers := []*proc{newProc("w1", "worker"), newProc("w2", "worker"), newProc("w3", "worker")}
	all := append(slices.Clone(gateways), workers...)
	for _, p := range all {
		p.start(t, bin)
	}
	t.Cleanup(func() {
		for _, p := range all {
			p.stop()
		}
		if t.Failed() {
			for _, p := range all {
				t.Logf("--- %s's log (end) ---\n%s", p.name, p.tail())
			}
		}
	})
	var bases sync.Map // gateway name → its base URL, once started
	for _, p := range all {
		addr, err := started(p, p.args[0], 1) // args[0]: gateway or worker
		if err != nil {
			t.Fatal(err)
		}
		bases.Store(p.name, "http://"+addr) // the workers' are never sent to
	}

	s := &sender{t: t, bases: &bases, names: []string{"g1", "g2"}}
	begin := time.Now()
	var faults sync.WaitGroup
	faults.Go(func() { injectFaults(t, begin, bin, pg, gateways[1], workers[0], &bases) })
	if nw.isolated {
		faults.Go(func() { cutLink(t, begin, workers[1], model) })
	}

	// The roots at 10 a second; each chosen root's follow-up once its
	// first answer is posted.
	var sends sync.WaitGroup
	for i := range roots {
		ts := rootTS(i)
		sends.Go(func() { s.send(fmt.Sprintf("EvR%04d", i), channelOf(i), nonce('R', i), ts, "") })
		time.Sleep(100 * time.Millisecond)
	}
	followed := map[int]bool{}
	deadline := time.Now().Add(5 * time.Minute)
	db := pg.connect(t)
	lastSaid := time.Now()
	for len(followed) < roots/followEvery && time.Now().Before(deadline) {
		answers := answered(slack)
		if time.Since(lastSaid) > 10*time.Second {
			lastSaid = time.Now()
			t.Logf("%s: %d answers posted; jobs: %s", time.Since(begin).Round(time.Second), len(answers), jobStates(t, db))
		}
		for i := 0; i < roots; i += followEvery {
			if !followed[i] && answers[nonce('R', i)] > 0 {
				followed[i] = true
				thread := rootTS(i)
				sends.Go(func() {
					s.send(fmt.Sprintf("EvF%04d", i), channelOf(i), nonce('F', i), followTS(i), thread)
				})
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	sends.Wait()
	faults.Wait()
	if len(followed) < roots/followEvery {
		t.Fatalf("only %d of %d first answers were posted within 5 minutes", len(followed), roots/followEvery)
	}

	events := roots + roots/followEvery
	waitSettled(t, db, slack, events, deadline)
	t.Logf("%d events (%d sent to both gateways) settled %s after the first send", events, s.dups(), time.Since(begin).Round(time.Second))
	checkStore(t, db, events)
	checkPosts(t, slack)
}

// tsBase is the run's start in Unix seconds: the messages' Slack
// timestamps are of today, as Slack's are. (Timestamps of 2023 made the
// comments older than retention.comments, and a pruning round that came
// during the run removed those of idle tasks.)
var tsBase = time.Now().Unix()

// rootTS is the Slack ts of thread i's root message, followTS of its
// follow-up.
func rootTS(i int) string   { return fmt.Sprintf("%d.%06d", tsBase-2000, i) }
func followTS(i int) string { return fmt.Sprintf("%d.%06d", tsBase-1000, i) }

// nonce names event i: R for a thread's root, F for its follow-up.
func nonce(kind byte, i int) string { return fmt.Sprintf("%c%04d", kind, i) }

var nonceInText = regexp.MustCompile(`task-([RF]\d{4})`)

// job is the scripted model: it writes a note naming the job's event, then
// thinks for a while and finishes with an answer naming it, so that a job
// lasts long enough to be caught by a fault.
func job(req llmtest.Request) (llmtest.Step, bool) {
	id := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			if all := nonceInText.FindAllStringSubmatch(m.Text(), -1); len(all) > 0 {
				id = all[len(all)-1][1]
			}
		}
	}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			s := llmtest.Transition("COMPLETE", "finished "+id)
			s.Delay = 800 * time.Millisecond
			return s, id != ""
		}
	}
	s := llmtest.Call("Write", fmt.Sprintf(`{"path":"notes/%s.txt","content":"%s"}`, id, id))
	s.Delay = 200 * time.Millisecond
	return s, id != ""
}

// buildBaton builds the binary once for the test, with the race detector
// (the packages are compiled for it already in a -race run).
func buildBaton(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "baton")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-race", "-o", bin, "github.com/baton-bot/baton/bot").CombinedOutput(); err != nil {
		t.Fatalf("build baton: %v\n%s", err, out)
	}
	return bin
}

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// startLine is the log line a process of cmd writes once started, with
// the HTTP address of a gateway.
func startLine(cmd string) *regexp.Regexp {
	if cmd == "worker" {
		return regexp.MustCompile(`msg="worker started"()`)
	}
	return regexp.MustCompile(`baton ` + cmd + ` started" http=(\S+)`)
}

// started waits for p's n-th start line (n ≥ 1: the n-th time it was
// started) and returns its HTTP address.
func started(p *proc, cmd string, n int) (string, error) {
	re := startLine(cmd)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(p.log)
		if m := re.FindAllSubmatch(b, -1); len(m) >= n {
			return string(m[n-1][1]), nil
		}
		select {
		case <-p.exited:
			return "", fmt.Errorf("%s exited before it started:\n%s", p.name, p.tail())
		default:
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s did not start within 2 minutes:\n%s", p.name, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sender sends signed events to the gateways as Slack does: an event not
// answered 200 is sent again (to the other gateway, as a load balancer
// would) with X-Slack-Retry-Num, until one takes it.
type sender struct {
	t     *testing.T
	bases *sync.Map
	names []string

	mu      sync.Mutex
	doubled int // guarded by mu
}

func (s *sender) send(eventID, channel, id, ts, thread string) {
	ev := map[string]any{"type": "app_mention", "user": "U7", "text": "<@" + slackfake.BotUser + "> please do task-" + id,
		"ts": ts, "channel": channel, "event_ts": ts}
	if thread != "" {
		ev["thread_ts"] = thread
	}
	body := slackfake.Callback(eventID, ev)
	first := rand.IntN(len(s.names))
	targets := []int{first}
	if rand.Float64() < dupShare {
		targets = append(targets, 1-first)
		s.mu.Lock()
		s.doubled++
		s.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, g := range targets {
		wg.Go(func() { s.deliver(body, g) })
	}
	wg.Wait()
}

// deliver sends body to gateway g until some gateway answers 200.
func (s *sender) deliver(body string, g int) {
	client := &http.Client{Timeout: 10 * time.Second}
	for try := 0; try < 60; try++ {
		base, _ := s.bases.Load(s.names[(g+try)%len(s.names)])
		r := slackfake.Sign(s.t, base.(string), "/slack/events", body, time.Now(), "application/json")
		if try > 0 {
			r.Header.Set("X-Slack-Retry-Num", strconv.Itoa(try))
			r.Header.Set("X-Slack-Retry-Reason", "http_error")
		}
		resp, err := client.Do(r)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.t.Errorf("no gateway took an event in 60 tries: %s", body)
}

func (s *sender) dups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doubled
}

// injectFaults kills worker w and gateway gw with SIGKILL and starts
// each again a few seconds later, with the same data_dir, and restarts
// PostgreSQL meanwhile.
func injectFaults(t *testing.T, begin time.Time, bin string, pg *postgres, gw, w *proc, bases *sync.Map) {
	at := func(d time.Duration) { time.Sleep(time.Until(begin.Add(d))) }
	say := func(what string, args ...any) {
		t.Logf("%s: %s", time.Since(begin).Round(time.Second), fmt.Sprintf(what, args...))
	}
	at(3 * time.Second)
	w.kill()
	say("SIGKILL %s", w.name)
	at(5 * time.Second)
	gw.kill()
	say("SIGKILL %s", gw.name)
	at(7 * time.Second)
	pg.restart(t)
	say("PostgreSQL restarted")
	w.start(t, bin)
	gw.start(t, bin)
	addr, err := started(gw, "gateway", 2)
	if err == nil {
		bases.Store(gw.name, "http://"+addr)
		_, err = started(w, "worker", 2)
	}
	if err != nil {
		t.Error(err)
		return
	}
	say("%s and %s started again", w.name, gw.name)
}

// cutLink cuts worker w's link for 20 s once it is waiting for the model
// (in a job), so that its lease runs out and its jobs go to the others.
func cutLink(t *testing.T, begin time.Time, w *proc, model *forwarder) {
	time.Sleep(time.Until(begin.Add(2 * time.Second)))
	deadline := time.Now().Add(30 * time.Second)
	for !model.busy(w.h.ip) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	busy := model.busy(w.h.ip)
	if err := w.h.setLink(false); err != nil {
		t.Error(err)
		return
	}
	t.Logf("%s: %s's link cut (waiting for the model: %v)", time.Since(begin).Round(time.Second), w.name, busy)
	time.Sleep(20 * time.Second)
	if err := w.h.setLink(true); err != nil {
		t.Error(err)
	}
	t.Logf("%s: %s's link back", time.Since(begin).Round(time.Second), w.name)
}

// answered counts the answers posted in threads, by the event they name.
func answered(slack *slackfake.Server) map[string]int {
	out := map[string]int{}
	re := regexp.MustCompile(`finished ([RF]\d{4})`)
	for _, c := range slack.Posts() {
		if m := re.FindStringSubmatch(c.Text + c.Blocks); m != nil && c.Method != "chat.update" {
			out[m[1]]++
		}
	}
	return out
}

// waitSettled waits until every job succeeded, the outbox and the inbox
// are empty and every answer is posted.
func waitSettled(t *testing.T, db *pgx.Conn, slack *slackfake.Server, events int, deadline time.Time) {
	t.Helper()
	ctx := t.Context()
	var jobs, succeeded, pending, inbox int
	for {
		err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM jobs WHERE state = 'succeeded'),
			(SELECT count(*) FROM outbox WHERE state = 'pending'), (SELECT count(*) FROM inbox)`).Scan(&jobs, &succeeded, &pending, &inbox)
		if err == nil && succeeded >= events && pending == 0 && inbox == 0 && len(answered(slack)) >= events {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %d jobs, %d succeeded (want %d), %d outbox messages pending, %d inbox events, %d answers posted (%v)",
				jobs, succeeded, events, pending, inbox, len(answered(slack)), err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// jobStates counts the jobs by state, for the log.
func jobStates(t *testing.T, db *pgx.Conn) string {
	rows, err := db.Query(t.Context(), `SELECT state || ' ' || count(*) FROM jobs GROUP BY state ORDER BY state`)
	if err != nil {
		return err.Error()
	}
	states, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return strings.Join(states, ", ")
}

// checkStore checks what the store holds once settled.
func checkStore(t *testing.T, db *pgx.Conn, events int) {
	t.Helper()
	ctx := t.Context()
	var tasks, threads, jobs int
	must(t, db.QueryRow(ctx, `SELECT count(*), count(DISTINCT (channel, thread)) FROM tasks`).Scan(&tasks, &threads))
	must(t, db.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&jobs))
	if tasks != roots || threads != roots {
		t.Errorf("%d tasks of %d threads, want one task per thread (%d)", tasks, threads, roots)
	}
	if jobs != events {
		t.Errorf("%d jobs, want one per distinct event (%d)", jobs, events)
	}
	rows, err := db.Query(ctx, `SELECT state, count(*) FROM jobs GROUP BY state`)
	must(t, err)
	states, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		State string
		N     int
	}])
	must(t, err)
	if len(states) != 1 || states[0].State != "succeeded" {
		t.Errorf("jobs by state: %v, want every job succeeded", states)
	}

	// Each event's text is one comment: neither lost nor doubled.
	rows, err = db.Query(ctx, `SELECT substring(text from 'task-([RF][0-9]{4})'), count(*) FROM comments
		WHERE text ~ 'task-[RF][0-9]{4}' GROUP BY 1`)
	must(t, err)
	comments, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID string
		N  int
	}])
	must(t, err)
	if len(comments) != events {
		t.Errorf("%d events have a comment, want %d", len(comments), events)
	}
	for _, c := range comments {
		if c.N != 1 {
			t.Errorf("event %s is %d comments, want 1", c.ID, c.N)
		}
	}

	var leftovers int
	must(t, db.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state <> 'sent'`).Scan(&leftovers))
	if leftovers != 0 {
		t.Errorf("%d outbox messages not sent", leftovers)
	}
	checkRuns(t, db)
}

// checkRuns reads the jobs' events: each job finished once, as its last
// event; each claim's attempt above the last, and a claim after the first
// only once the run before it ended (its lease lost, or requeued); and
// the jobs of one task never running at once.
func checkRuns(t *testing.T, db *pgx.Conn) {
	t.Helper()
	rows, err := db.Query(t.Context(), `SELECT j.task_id, e.job_id, e.kind, e.detail, e.at FROM job_events e
		JOIN jobs j ON j.id = e.job_id ORDER BY e.job_id, e.id`)
	must(t, err)
	type event struct {
		Task, Job    int64
		Kind, Detail string
		At           int64
	}
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[event])
	must(t, err)
	type span struct{ from, to int64 }
	byJob := map[int64][]event{}
	var order []int64
	for _, e := range evs {
		if _, ok := byJob[e.Job]; !ok {
			order = append(order, e.Job)
		}
		byJob[e.Job] = append(byJob[e.Job], e)
	}
	attemptOf := regexp.MustCompile(`^attempt (\d+)`)
	runs := map[int64][]span{} // task → its jobs' spans, first claim to finish
	takeovers := 0
	for _, id := range order {
		list := byJob[id]
		finished, last := 0, int64(0)
		open := false
		var first int64
		for _, e := range list {
			switch e.Kind {
			case "claimed":
				m := attemptOf.FindStringSubmatch(e.Detail)
				if m == nil {
					t.Errorf("job %d: claimed event %q names no attempt", id, e.Detail)
					continue
				}
				n, _ := strconv.ParseInt(m[1], 10, 64)
				if n <= last {
					t.Errorf("job %d: attempt %d claimed after attempt %d", id, n, last)
				}
				if open {
					t.Errorf("job %d: attempt %d claimed while attempt %d ran", id, n, last)
				}
				if last > 0 {
					takeovers++
				} else {
					first = e.At
				}
				last, open = n, true
			case "lease_lost", "requeued":
				open = false
			case "finished":
				finished++
				open = false
			}
		}
		if finished != 1 || list[len(list)-1].Kind != "finished" {
			t.Errorf("job %d: finished %d times, last event %q; want once, last", id, finished, list[len(list)-1].Kind)
		}
		runs[list[0].Task] = append(runs[list[0].Task], span{first, list[len(list)-1].At})
	}
	for task, spans := range runs {
		slices.SortFunc(spans, func(a, b span) int { return int(a.from - b.from) })
		for i := 1; i < len(spans); i++ {
			if spans[i].from < spans[i-1].to {
				t.Errorf("task %d: two jobs ran at once (%v, %v)", task, spans[i-1], spans[i])
			}
		}
	}
	t.Logf("%d jobs, %d claims after a lost lease or a requeue", len(order), takeovers)
}

// checkPosts: every answer was posted once, in the thread of its task.
func checkPosts(t *testing.T, slack *slackfake.Server) {
	t.Helper()
	counts := answered(slack)
	for id, n := range counts {
		if n != 1 {
			t.Errorf("the answer of event %s was posted %d times", id, n)
		}
	}
	if want := roots + roots/followEvery; len(counts) != want {
		t.Errorf("answers of %d events posted, want %d", len(counts), want)
	}
	re := regexp.MustCompile(`finished [RF](\d{4})`)
	for _, c := range slack.Posts() {
		m := re.FindStringSubmatch(c.Text + c.Blocks)
		if m == nil || c.Method == "chat.update" {
			continue
		}
		i, _ := strconv.Atoi(m[1])
		if want := rootTS(i); c.ThreadTS != want || c.Channel != channelOf(i) {
			t.Errorf("answer %q posted in %s thread %q, want %s thread %q", m[0], c.Channel, c.ThreadTS, channelOf(i), want)
		}
	}
}
