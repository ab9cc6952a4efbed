// Command loadtest measures Baton under load, as processes of its own
// built binary, with the scripted model of core/llmtest and a fake Slack
// Web API. It has three modes.
//
// Ingest (the default) measures how fast a running `baton serve` takes
// Slack events in: it starts `baton serve` (Slack adapter in HTTP mode,
// the model answering every request with a transition at once), sends it
// signed app_mention events at a steady rate, each a new thread, and reads
// from the serve's store how long each event waited for a worker to claim
// its job (the job's own "claimed" event, written in the claim's
// transaction). An event whose job was not claimed within -settle of the
// last send is lost; an answer other than 200 (a full backlog answers 503,
// which Slack retries) is refused. The exit status is 1 when the target
// (p99 under -target, nothing lost or refused) is missed.
//
//	go run ./bot/loadtest                       # 200 events/s for 30 s, in-process queue, SQLite
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./bot/loadtest
//	go run ./bot/loadtest -database-url 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./bot/loadtest -disk-noise           # meanwhile 1 MB writes, each fsynced, on the store's filesystem
//
// Job rate (-worker-processes 1,2,4) measures how many jobs a second
// worker processes finish: for each count N it starts one `baton gateway`,
// sends it the events as above, waits until their jobs are queued, then
// starts N `baton worker` processes (each with its own data_dir; they
// share the store, a Redis queue and a workspace root) and reads from the
// store when the jobs finished: jobs/s is the rate of the middle 80 % of
// the finishes (the first and last tenth are the workers' start and the
// backlog's tail). Each job does a little real work: the model answers
// three times, each after -think, with a Write of a small file in the
// task's workspace, a Read of it, and the transition that completes the
// job (whose summary the gateway posts). The exit status is 1 when a job
// did not succeed.
//
//	go run ./bot/loadtest -worker-processes 1,2,4 -database-url 'postgres://…'
//
// Soak (-soak) sends the ingest mode's events for a long time (278/s for
// 30 minutes, about 500,000 events, unless -rate and -duration say
// otherwise) and reads the serve's resident set (/proc) and goroutine
// count (/metrics) every -soak-sample: the RSS at the end of sending must
// be within 10 % of the RSS after -soak-warmup, the goroutines after the
// last job no more than before the first event, and every event's job
// must succeed, else the exit status is 1 (soak.go).
//
//	go run ./bot/loadtest -soak                                  # 278/s for 30 min
//	go run ./bot/loadtest -soak -duration 10m -rate 200 -soak-warmup 2m
//
// With -database-url each run (each N) uses a schema of its own on that
// PostgreSQL server, dropped when the run ends (kept with -keep); without
// it, a SQLite file in the run's directory. Without -redis, the job-rate
// mode starts a redis-server of its own.
package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/baton-bot/baton/core/llmtest"
)

// options are the command's flags.
type options struct {
	rate        int           // events per second
	duration    time.Duration // how long to send
	workers     int           // workers.concurrency of the serve, or of each worker process
	redisURL    string        // empty: the serve's in-process queue, or a redis-server of the run's own
	databaseURL string        // a PostgreSQL server for the runs' schemas; empty: SQLite
	processes   []int         // worker process counts of the job-rate mode; nil: ingest mode
	soak        soakOptions   // the soak mode's flags (soak.go)
	think       time.Duration // job-rate mode: the model's delay before each answer
	baton       string        // the baton binary; empty: built from this module
	settle      time.Duration // ingest: how long after the last send a job may still be claimed; job rate: how long the jobs may go without one finishing
	target      time.Duration // the p99 the ingest run should stay under
	keep        bool          // keep the work directory (config, store, logs) and a PostgreSQL schema
	diskNoise   bool          // ingest: write and fsync 1 MB at a time in the work directory meanwhile (noise.go)
	noiseRate   int           // MB/s the noise writes at most; 0: as fast as it can
	fill        int           // tenths of a busy year written into the store before baton starts (storefill.Scale); 0: an empty store
	progress    io.Writer     // where the steps are told; nil: nowhere
}

// result is what one ingest run measured.
type result struct {
	Store               string // which store, in words
	Sent, Refused, Lost int
	Succeeded           int // jobs that ran to the end
	P50, P90, P99, Max  time.Duration
	ServeCPU            time.Duration // user + system time of the serve process
	ServePeakRSS        int64         // bytes (VmHWM)
	Dir                 string        // the work directory, when kept
	Noise               *noiseResult  // what -disk-noise did; nil without it
}

func main() {
	var o options
	var processes string
	flag.IntVar(&o.rate, "rate", 200, "events per second")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long to send")
	flag.IntVar(&o.workers, "workers", 16, "workers.concurrency of the serve, or of each worker process")
	flag.StringVar(&o.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL for the queue; empty: the serve's in-process queue, or a redis-server of the job-rate run's own")
	flag.StringVar(&o.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL server on which each run makes a schema of its own; empty: SQLite")
	flag.StringVar(&processes, "worker-processes", "", "measure jobs/s with one gateway and each of these counts of worker processes (1,2,4) instead of ingest")
	flag.BoolVar(&o.soak.on, "soak", false, "soak: send events for long (278/s for 30 min unless -rate and -duration are given) and watch the serve's RSS and goroutines")
	flag.DurationVar(&o.soak.warm, "soak-warmup", 5*time.Minute, "soak: the RSS this long after the first event is the one the end's is held to")
	flag.DurationVar(&o.soak.every, "soak-sample", 5*time.Second, "soak: how often the serve's RSS and goroutines are read")
	flag.DurationVar(&o.soak.quiet, "soak-quiet", 2*time.Minute, "soak: how long after the last job the serve's goroutines may take to come back down")
	flag.DurationVar(&o.think, "think", 50*time.Millisecond, "job rate: how long the model takes before each of a job's three answers")
	flag.StringVar(&o.baton, "baton", "", "baton binary to run; empty: build this module's")
	flag.DurationVar(&o.settle, "settle", 60*time.Second, "ingest: how long after the last send a job may still be claimed; job rate: how long the jobs may go without one finishing")
	flag.DurationVar(&o.target, "target", 50*time.Millisecond, "ingest: p99 target")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (config, store, logs) and a PostgreSQL schema")
	flag.BoolVar(&o.diskNoise, "disk-noise", false, "ingest: meanwhile write 1 MB and fsync it, in a loop, on the store's filesystem (the work directory)")
	flag.IntVar(&o.noiseRate, "disk-noise-rate", 100, "ingest: the MB/s the disk noise writes and syncs at most; 0: as fast as it can (on a small machine the loop's own CPU then competes with the serve)")
	flag.IntVar(&o.fill, "fill", 0, "write this many tenths of a busy year of finished work into the store before baton starts (10: 1M jobs, 300k tasks, 10M events); 0: an empty store")
	flag.Parse()
	o.progress = os.Stderr
	if processes != "" {
		for f := range strings.SplitSeq(processes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintln(os.Stderr, "loadtest: -worker-processes wants counts such as 1,2,4")
				os.Exit(2)
			}
			o.processes = append(o.processes, n)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.soak.on {
		os.Exit(soakMain(ctx, o))
	}
	if o.processes != nil {
		res, err := runRates(ctx, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(2)
		}
		fmt.Print(rateReport(res, o))
		for _, r := range res {
			if !r.ok() {
				os.Exit(1)
			}
		}
		return
	}
	res, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	fmt.Print(res.report(o))
	if res.Lost > 0 || res.Refused > 0 || res.P99 >= o.target {
		os.Exit(1)
	}
}

// report is the result as the command prints it.
func (r result) report(o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "store            %s\n", r.Store)
	fmt.Fprintf(&b, "events sent      %d (%d/s for %s)\n", r.Sent, o.rate, o.duration)
	fmt.Fprintf(&b, "refused          %d\n", r.Refused)
	fmt.Fprintf(&b, "lost             %d\n", r.Lost)
	fmt.Fprintf(&b, "jobs succeeded   %d\n", r.Succeeded)
	fmt.Fprintf(&b, "event→claimed    p50 %s  p90 %s  p99 %s  max %s\n", ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max))
	b.WriteString(r.Noise.String())
	fmt.Fprintf(&b, "serve process    %.1f CPU-seconds, peak RSS %.0f MB\n", r.ServeCPU.Seconds(), float64(r.ServePeakRSS)/(1<<20))
	verdict := "met"
	if r.Lost > 0 || r.Refused > 0 || r.P99 >= o.target {
		verdict = "MISSED"
	}
	fmt.Fprintf(&b, "target           p99 < %s, 0 lost, 0 refused: %s\n", ms(o.target), verdict)
	if r.Dir != "" {
		fmt.Fprintf(&b, "work directory   %s\n", r.Dir)
	}
	return b.String()
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + " ms" }

// say tells a step of the run on o.progress.
func (o options) say(format string, args ...any) {
	if o.progress != nil {
		fmt.Fprintf(o.progress, format+"\n", args...)
	}
}

// workDir makes a run's directory; cleanup removes it unless o.keep.
func (o options) workDir(pattern string) (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	if o.keep {
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// store makes a run's database; cleanup drops a PostgreSQL schema unless
// o.keep.
func (o options) store(ctx context.Context, dir string) (db *database, cleanup func(), err error) {
	db, err = newDatabase(ctx, o.databaseURL, dir)
	if err != nil {
		return nil, nil, err
	}
	if err := o.fillStore(ctx, db); err != nil {
		if !o.keep {
			_ = db.drop()
		}
		return nil, nil, err
	}
	if o.keep {
		return db, func() {}, nil
	}
	return db, func() {
		if err := db.drop(); err != nil {
			o.say("could not drop the run's schema: %v", err)
		}
	}, nil
}

// batonBinary is o.baton, or this module's baton built into dir.
func (o options) batonBinary(ctx context.Context, dir string) (string, error) {
	if o.baton != "" {
		return o.baton, nil
	}
	o.say("building baton…")
	return build(ctx, dir)
}

// config writes a configuration every process of a run reads: Slack in
// HTTP mode against slackURL, workers.concurrency workers, and, when
// root is set, the workspace root the processes share.
func config(dir, slackURL string, workers int, root string) (string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "pieces"), 0o755); err != nil {
		return "", err
	}
	var ws string
	if root != "" {
		ws = "workspaces:\n  root: " + root + "\n"
	}
	conf := filepath.Join(dir, "baton.yaml")
	err := os.WriteFile(conf, fmt.Appendf(nil, `pieces_dir: %s
http:
  addr: 127.0.0.1:0
slack:
  enabled: true
  mode: http
  api_url: %s/api/
workers:
  concurrency: %d
%slog:
  format: text
  level: info
`, filepath.Join(dir, "pieces"), slackURL, workers, ws), 0o600)
	return conf, err
}

// environ is a baton process's whole environment: data_dir, the store,
// the queue, the model and Slack's secrets, and the load test's own BATON_
// variables, but BATON_DATA_DIR (BATON_LOG_LEVEL=debug logs the store's
// WAL checkpoints and restarts with their pauses; BATON_ADMIN_ADDR and
// BATON_ADMIN_PPROF=true serve Go's profiles, their address in the log).
func environ(dir, dataDir string, db *database, redisURL, llmURL, secret string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + os.TempDir(),
		"BATON_DATA_DIR=" + dataDir, "DATABASE_URL=" + db.url,
		"OPENAI_BASE_URL=" + llmURL, "OPENAI_API_KEY=sk-load",
		"SLACK_BOT_TOKEN=xoxb-load", "SLACK_SIGNING_SECRET=" + secret,
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "BATON_") && !strings.HasPrefix(kv, "BATON_DATA_DIR=") {
			env = append(env, kv)
		}
	}
	if redisURL != "" {
		env = append(env, "REDIS_URL="+redisURL)
	}
	return env
}

var (
	serveStarted = regexp.MustCompile(`baton serve started" http=(\S+)`)
	// serveAdmin is the admin.addr in the same line, when one is set
	// (BATON_ADMIN_ADDR): /metrics is served there.
	serveAdmin = regexp.MustCompile(`baton serve started" http=\S+ admin=(\S+)`)
)

// served is a baton serve of a run's own, started with the fakes it
// talks to (the scripted model completing every job at once, the fake
// Slack Web API) in a work directory of its own: what the ingest and soak
// modes start alike. close stops and removes all of it, in the reverse
// order of its start.
type served struct {
	dir     string    // the work directory
	db      *database // the run's store
	serve   *process
	base    string // the serve's HTTP base URL
	ops     string // the base URL of its /metrics: admin.addr's when set, else base
	secret  string // the Slack signing secret the events are signed with
	closers []func()
}

func (s *served) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// startServe starts a served run in a new directory named after prefix
// and waits until the serve listens; on an error what was started is
// stopped again.
func (o options) startServe(ctx context.Context, prefix string) (_ *served, err error) {
	s := &served{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	dir, cleanup, err := o.workDir(prefix)
	if err != nil {
		return nil, err
	}
	s.dir, s.closers = dir, append(s.closers, cleanup)
	bin, err := o.batonBinary(ctx, dir)
	if err != nil {
		return nil, err
	}
	db, drop, err := o.store(ctx, dir)
	if err != nil {
		return nil, err
	}
	s.db, s.closers = db, append(s.closers, drop)

	llm := llmtest.Start(complaints{}, llmtest.WithoutRequestLog())
	s.closers = append(s.closers, llm.Close)
	llm.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "ok") })
	slack := fakeSlack()
	s.closers = append(s.closers, slack.Close)

	s.secret = randomHex()
	conf, err := config(dir, slack.URL, o.workers, "")
	if err != nil {
		return nil, err
	}
	env := environ(dir, filepath.Join(dir, "data"), db, o.redisURL, llm.URL(), s.secret)
	logPath := filepath.Join(dir, "serve.log")
	o.say("starting baton serve on %s (log: %s)…", db.String(), logPath)
	if s.serve, err = startBaton("serve", bin, dir, logPath, env, "serve", "--config", conf); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.serve.stop)
	addr, err := s.serve.logged(ctx, serveStarted)
	if err != nil {
		return nil, err
	}
	s.base, s.ops = "http://"+addr, "http://"+addr
	if log, err := os.ReadFile(logPath); err == nil {
		if m := serveAdmin.FindSubmatch(log); m != nil {
			s.ops = "http://" + string(m[1])
		}
	}
	return s, nil
}

// run starts the fakes and the serve, sends the events and measures.
func run(ctx context.Context, o options) (res result, err error) {
	s, err := o.startServe(ctx, "baton-load-")
	if err != nil {
		return res, err
	}
	defer s.close() // the serve's figures are read before it is stopped
	if o.keep {
		res.Dir = s.dir
	}
	res.Store = s.db.String()
	dir, db, serve, base, secret := s.dir, s.db, s.serve, s.base, s.secret

	stopNoise, err := o.startNoise(dir)
	if err != nil {
		return res, err
	}
	sent, refused, store, err := sendAndOpen(ctx, o, db, base, secret)
	if err != nil {
		stopNoise()
		return res, err
	}
	defer store.Close()
	res.Sent, res.Refused = len(sent), refused
	o.say("waiting for the last jobs to be claimed…")
	res.Succeeded, err = settle(ctx, store, len(sent)-refused, o.settle)
	res.Noise = stopNoise()
	if err != nil {
		return res, err
	}
	lat, err := latencies(ctx, store, sent)
	if err != nil {
		return res, err
	}
	res.Lost = len(sent) - refused - len(lat)
	if len(lat) > 0 {
		pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
		res.P50, res.P90, res.P99, res.Max = pct(0.50), pct(0.90), pct(0.99), lat[len(lat)-1]
	}
	res.ServeCPU, res.ServePeakRSS = serve.figures()
	return res, nil
}

// complaints prints what the scripted model finds wrong with a request.
type complaints struct{}

func (complaints) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadtest: model: "+format+"\n", args...)
}

// fakeSlack answers every Web API method with ok, a fresh message ts and
// the bot's identity (auth.test reads user_id, bot_id and team_id; the
// posting methods read channel and ts; conversations.replies reads an
// empty thread).
func fakeSlack() *httptest.Server {
	var seq atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"ok": true, "user_id": "UBATON", "bot_id": "BBATON", "team_id": "T1", "user": "baton",
			"channel": r.FormValue("channel"), "ts": fmt.Sprintf("1700000100.%06d", seq.Add(1)),
			"messages": []any{}, "has_more": false,
		})
	}))
}

// send posts rate signed app_mention events a second for d, each on its own
// goroutine so that a slow answer never delays the next send, and returns
// when each was sent (by message ts) and how many were answered other than
// 200.
func send(ctx context.Context, base, secret string, rate int, d time.Duration) (map[string]time.Time, int, error) {
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256},
	}
	var (
		mu      sync.Mutex
		sent    = map[string]time.Time{}
		refused int
		errs    []error
		wg      sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	n := int(int64(rate) * int64(d) / int64(time.Second))
	for i := range n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			wg.Wait()
			return nil, 0, ctx.Err()
		}
		ts := fmt.Sprintf("1800000000.%06d", i)
		body := mention(fmt.Sprintf("Ev%d", i), ts)
		wg.Go(func() {
			now := time.Now()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/slack/events", strings.NewReader(body))
			if err != nil {
				panic(err) // a constant URL and method
			}
			sign(req, secret, body, now)
			mu.Lock()
			sent[ts] = now
			mu.Unlock()
			resp, err := client.Do(req)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				mu.Lock()
				refused++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, 0, fmt.Errorf("%d of %d events could not be sent: %w", len(errs), n, errors.Join(errs[:min(3, len(errs))]...))
	}
	return sent, refused, nil
}

// mention is an app_mention event callback opening a new thread.
func mention(eventID, ts string) string {
	b, _ := json.Marshal(map[string]any{
		"token": "unused", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
		"event_id": eventID, "event_time": time.Now().Unix(),
		"event": map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBATON> ping",
			"ts": ts, "channel": "C1", "event_ts": ts},
	})
	return string(b)
}

// sign adds Slack's request signature (v0, HMAC-SHA256 of the timestamp and
// body with the signing secret).
func sign(r *http.Request, secret, body string, at time.Time) {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	r.Header.Set("X-Slack-Request-Timestamp", ts)
	r.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	r.Header.Set("Content-Type", "application/json")
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sendAndOpen sends o.rate events a second for o.duration to the gateway
// at base, then opens the store their jobs are in, to read the outcome.
func sendAndOpen(ctx context.Context, o options, db *database, base, secret string) (map[string]time.Time, int, jobReader, error) {
	o.say("sending %d events/s for %s to %s/slack/events…", o.rate, o.duration, base)
	sent, refused, err := send(ctx, base, secret, o.rate, o.duration)
	if err != nil {
		return nil, 0, nil, err
	}
	store, err := db.open(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	return sent, refused, store, nil
}
