// Command loadtest measures how fast a running `baton serve` takes Slack
// events in: it starts `baton serve` as a process of its own (Slack
// adapter in HTTP mode, the scripted model of core/llmtest answering every
// request with a transition at once, a fake Slack Web API), sends it
// signed app_mention events at a steady rate, each a new thread, and reads
// from the serve's SQLite file how long each event waited for a worker to
// claim its job (the job's own "claimed" event, written in the claim's
// transaction).
//
//	go run ./bot/loadtest                       # 200 events/s for 30 s, in-process queue
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./bot/loadtest
//
// An event whose job was not claimed within -settle of the last send is
// lost; an answer other than 200 (a full backlog answers 503, which Slack
// retries) is refused. The exit status is 1 when the target (p99 under
// -target, nothing lost or refused) is missed.
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
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/sqlite"
)

// options are the command's flags.
type options struct {
	rate     int           // events per second
	duration time.Duration // how long to send
	workers  int           // workers.concurrency of the serve
	redisURL string        // empty: the serve's in-process queue
	baton    string        // the baton binary; empty: built from this module
	settle   time.Duration // how long after the last send a job may still be claimed
	target   time.Duration // the p99 the run should stay under
	keep     bool          // keep the work directory (config, store, serve's log)
	progress io.Writer     // where the steps are told; nil: nowhere
}

// result is what one run measured.
type result struct {
	Sent, Refused, Lost int
	Succeeded           int // jobs that ran to the end
	P50, P90, P99, Max  time.Duration
	ServeCPU            time.Duration // user + system time of the serve process
	ServePeakRSS        int64         // bytes (VmHWM)
	Dir                 string        // the work directory, when kept
}

func main() {
	var o options
	flag.IntVar(&o.rate, "rate", 200, "events per second")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long to send")
	flag.IntVar(&o.workers, "workers", 16, "workers.concurrency of the serve")
	flag.StringVar(&o.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL for the serve's queue; empty: in-process queue")
	flag.StringVar(&o.baton, "baton", "", "baton binary to run; empty: build this module's")
	flag.DurationVar(&o.settle, "settle", 60*time.Second, "how long after the last send a job may still be claimed")
	flag.DurationVar(&o.target, "target", 50*time.Millisecond, "p99 target")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (config, store, the serve's log)")
	flag.Parse()
	o.progress = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
	fmt.Fprintf(&b, "events sent      %d (%d/s for %s)\n", r.Sent, o.rate, o.duration)
	fmt.Fprintf(&b, "refused          %d\n", r.Refused)
	fmt.Fprintf(&b, "lost             %d\n", r.Lost)
	fmt.Fprintf(&b, "jobs succeeded   %d\n", r.Succeeded)
	fmt.Fprintf(&b, "event→claimed    p50 %s  p90 %s  p99 %s  max %s\n", ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max))
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

// run starts the fakes and the serve, sends the events and measures.
func run(ctx context.Context, o options) (res result, err error) {
	say := func(format string, args ...any) {
		if o.progress != nil {
			fmt.Fprintf(o.progress, format+"\n", args...)
		}
	}
	dir, err := os.MkdirTemp("", "baton-load-")
	if err != nil {
		return res, err
	}
	if o.keep {
		res.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	bin := o.baton
	if bin == "" {
		bin = filepath.Join(dir, "baton")
		say("building baton…")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/baton-bot/baton/bot")
		if out, err := build.CombinedOutput(); err != nil {
			return res, fmt.Errorf("build baton: %w\n%s", err, out)
		}
	}

	llm := llmtest.Start(complaints{})
	defer llm.Close()
	llm.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "ok") })
	slack := fakeSlack()
	defer slack.Close()

	secret := randomHex()
	conf := filepath.Join(dir, "baton.yaml")
	if err := os.MkdirAll(filepath.Join(dir, "pieces"), 0o755); err != nil {
		return res, err
	}
	err = os.WriteFile(conf, fmt.Appendf(nil, `data_dir: %s
pieces_dir: %s
http:
  addr: 127.0.0.1:0
slack:
  enabled: true
  mode: http
  api_url: %s/api/
workers:
  concurrency: %d
log:
  format: text
  level: info
`, filepath.Join(dir, "data"), filepath.Join(dir, "pieces"), slack.URL, o.workers), 0o600)
	if err != nil {
		return res, err
	}
	logPath := filepath.Join(dir, "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return res, err
	}
	defer logFile.Close()
	serve := exec.Command(bin, "serve", "--config", conf)
	serve.Dir = dir
	serve.Stdout, serve.Stderr = logFile, logFile
	serve.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + os.TempDir(),
		"OPENAI_BASE_URL=" + llm.URL(), "OPENAI_API_KEY=sk-load",
		"SLACK_BOT_TOKEN=xoxb-load", "SLACK_SIGNING_SECRET=" + secret,
	}
	if o.redisURL != "" {
		serve.Env = append(serve.Env, "REDIS_URL="+o.redisURL)
	}
	say("starting baton serve (log: %s)…", logPath)
	if err := serve.Start(); err != nil {
		return res, fmt.Errorf("start baton serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	defer func() {
		// The serve's figures are read before it is stopped.
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = serve.Process.Kill()
			<-exited
		}
	}()
	addr, err := startedAt(ctx, logPath, exited)
	if err != nil {
		return res, err
	}
	base := "http://" + addr

	say("sending %d events/s for %s to %s/slack/events…", o.rate, o.duration, base)
	sent, refused, err := send(ctx, base, secret, o.rate, o.duration)
	if err != nil {
		return res, err
	}
	res.Sent, res.Refused = len(sent), refused

	store, err := sqlite.Open(ctx, filepath.Join(dir, "data", "baton.db"), sqlite.Options{})
	if err != nil {
		return res, fmt.Errorf("open the serve's store: %w", err)
	}
	defer store.Close()
	say("waiting for the last jobs to be claimed…")
	if res.Succeeded, err = settle(ctx, store, len(sent)-refused, o.settle); err != nil {
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
	res.ServeCPU, res.ServePeakRSS = processFigures(serve.Process.Pid)
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

var startedLine = regexp.MustCompile(`baton serve started" http=(\S+)`)

// startedAt waits for the serve's "started" log line and returns its
// HTTP address.
func startedAt(ctx context.Context, logPath string, exited <-chan error) (string, error) {
	deadline := time.After(60 * time.Second)
	for {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return "", err
		}
		if m := startedLine.FindSubmatch(b); m != nil {
			return string(m[1]), nil
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("baton serve exited before it started (%v):\n%s", err, b)
		case <-deadline:
			return "", fmt.Errorf("baton serve did not start within 60 s:\n%s", b)
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
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

// settle waits until want jobs exist and every one has ended, or until
// wait has passed, and returns how many succeeded.
func settle(ctx context.Context, store *sqlite.Store, want int, wait time.Duration) (succeeded int, err error) {
	deadline := time.Now().Add(wait)
	for {
		n, err := store.CountJobs(ctx)
		if err != nil {
			return 0, err
		}
		var total, ended int64
		for state, c := range n {
			total += c
			if state.Terminal() {
				ended += c
			}
		}
		if (total >= int64(want) && ended == total) || time.Now().After(deadline) {
			return int(n[core.JobSucceeded]), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// latencies reads, for each job the events started, the time from sending
// its event to its "claimed" event, sorted. The store keeps times in
// milliseconds, so the send time is cut to the millisecond too.
func latencies(ctx context.Context, store *sqlite.Store, sent map[string]time.Time) ([]time.Duration, error) {
	jobs, err := store.Jobs(ctx, core.JobFilter{})
	if err != nil {
		return nil, err
	}
	if len(jobs) > len(sent) {
		return nil, fmt.Errorf("%d jobs for %d events: an event started more than one job", len(jobs), len(sent))
	}
	var lat []time.Duration
	for _, j := range jobs {
		at, ok := sent[j.TriggerMsgID]
		if !ok {
			continue
		}
		evs, err := store.Events(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.Kind == core.EventClaimed {
				lat = append(lat, e.At.Sub(at.Truncate(time.Millisecond)))
				break
			}
		}
	}
	slices.Sort(lat)
	return lat, nil
}

// processFigures reads a process's CPU time and peak resident set from
// /proc; zero where /proc does not tell.
func processFigures(pid int) (cpu time.Duration, peakRSS int64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command name (which may hold spaces) in ")".
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 12 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				peakRSS = kb << 10
			}
		}
	}
	return cpu, peakRSS
}
