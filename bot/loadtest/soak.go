package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
)

// soakOptions are the flags of the soak mode.
type soakOptions struct {
	on    bool
	warm  time.Duration // the RSS this long after the first event is the one the end's is held to
	every time.Duration // how often the serve's RSS and goroutines are read
	quiet time.Duration // how long after the last job the goroutines may take to come back down
}

// Soak's defaults: 278 events/s for 30 min is about 500,000 events, a busy
// team's day of Slack traffic compressed into half an hour.
const (
	soakRate     = 278
	soakDuration = 30 * time.Minute
	// soakGrowth is how much the serve's RSS may grow from the warm-up
	// mark to the end of sending.
	soakGrowth = 0.10
	// maxSoakEvents: each event's message ts counts up in the six digits
	// of the microseconds of one second (see send).
	maxSoakEvents = 1_000_000
)

// soakResult is what one soak run measured.
type soakResult struct {
	Store              string
	Sent, Refused      int
	Sending            time.Duration // how long the sending took (longer than -duration on a busy machine)
	Succeeded          int
	Samples            []sample      // the serve's figures, every -soak-sample from the first event on
	Failed             int           // samples that could not be read
	Warm, End, Drained sample        // at the warm-up mark, the last sample while sending, after the last job
	Before             int           // goroutines before the first event
	After              int           // the fewest goroutines in the quiet wait after the last job
	Quieted            time.Duration // when, after the last job, After was read
	ServeCPU           time.Duration
	ServePeakRSS       int64
	Load               [2]string // the machine's 1-minute load average before the first event and after the last job
	Dir                string
}

// sample is the serve's resident set and goroutine count at At, the time
// since the first event was sent, with what tells the resident set's
// parts apart: the Go heap's spans in use, and the resident pages that
// are mapped files (the binary, SQLite's shared WAL index) rather than
// anonymous memory (Go's heap and stacks, SQLite's caches).
type sample struct {
	At         time.Duration
	RSS        int64 // bytes (VmRSS)
	File       int64 // bytes (RssFile + RssShmem)
	GoHeap     int64 // bytes in the Go heap's spans in use (go_memstats_heap_inuse_bytes)
	Goroutines int   // go_goroutines from /metrics
}

// unsucceeded is how many accepted events did not end as a job that
// succeeded: never made, failed, or not ended within -settle.
func (r soakResult) unsucceeded() int { return r.Sent - r.Refused - r.Succeeded }

// growth is the RSS at the end of sending relative to the warm-up mark's.
func (r soakResult) growth() float64 {
	if r.Warm.RSS == 0 {
		return 0
	}
	return float64(r.End.RSS-r.Warm.RSS) / float64(r.Warm.RSS)
}

// ok reports whether the run met its targets: the RSS at the end of
// sending within soakGrowth of the warm-up mark's, no more goroutines
// after the last job than before the first event, every accepted event's
// job succeeded.
func (r soakResult) ok() bool {
	return r.Warm.RSS > 0 && r.End.RSS > 0 && r.growth() <= soakGrowth &&
		r.Before > 0 && r.After <= r.Before && r.Sent > 0 && r.unsucceeded() == 0
}

// soakMain runs the soak mode with o's flags, prints its report and
// returns the exit status: 0 when the targets were met, 1 when not, 2
// when the run could not be made. -rate and -duration, unless given,
// take the soak's defaults.
func soakMain(ctx context.Context, o options) int {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rate"] {
		o.rate = soakRate
	}
	if !set["duration"] {
		o.duration = soakDuration
	}
	res, err := runSoak(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 2
	}
	fmt.Print(res.report(o))
	if !res.ok() {
		return 1
	}
	return 0
}

// runSoak starts the fakes and the serve as the ingest mode does, reads
// the serve's goroutines once it is idle, sends the events while sampling
// its RSS and goroutines, waits for every job to end, then for the
// goroutines to come back down. The answers are not waited for: at the
// soak's rate the outbox, which posts one message a second in a channel,
// is far behind the run's one channel when the last job ends.
func runSoak(ctx context.Context, o options) (res soakResult, err error) {
	n := int64(o.rate) * int64(o.duration) / int64(time.Second)
	switch {
	case o.rate < 1 || n < 1:
		return res, errors.New("-soak needs a -rate and -duration that send at least one event")
	case n > maxSoakEvents:
		return res, fmt.Errorf("-soak sends at most %d events; %d/s for %s is %d", maxSoakEvents, o.rate, o.duration, n)
	case o.soak.warm <= 0 || o.soak.warm >= o.duration:
		return res, fmt.Errorf("-soak-warmup (%s) must be shorter than -duration (%s)", o.soak.warm, o.duration)
	case o.soak.every <= 0 || o.soak.every > o.soak.warm:
		return res, fmt.Errorf("-soak-sample (%s) must be positive and at most -soak-warmup (%s)", o.soak.every, o.soak.warm)
	}
	s, err := o.startServe(ctx, "baton-soak-")
	if err != nil {
		return res, err
	}
	defer s.close()
	if o.keep {
		res.Dir = s.dir
	}
	res.Store = s.db.String()
	db, serve, base, secret := s.db, s.serve, s.base, s.secret
	w := newWatch(serve.cmd.Process.Pid, s.ops)
	defer w.close()

	if res.Before, err = w.idle(ctx); err != nil {
		return res, err
	}
	res.Load[0] = loadAverage()
	o.say("%d goroutines in the serve before the first event; sampling every %s", res.Before, o.soak.every)
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	start := time.Now()
	go func() { defer close(sampled); w.sample(sampling, start, o.soak.every) }()
	sent, refused, store, err := sendAndOpen(ctx, o, db, base, secret)
	sending := time.Since(start)
	if err != nil {
		stopSampling()
		<-sampled
		return res, err
	}
	defer store.Close()
	res.Sent, res.Refused, res.Sending = len(sent), refused, sending
	o.say("sent %d events in %s; waiting for the last jobs to end…", len(sent), sending.Round(time.Second))
	// A busy machine leaves a backlog: the jobs are waited for as long as
	// they keep ending, and the run fails when none has for -settle.
	want := int64(len(sent) - refused)
	err = await(ctx, store, o.settle, func(total, ended int64) (int64, bool) { return ended, total >= want && ended == total })
	stopSampling()
	<-sampled
	if err != nil {
		return res, fmt.Errorf("the jobs of the events sent: %w", err)
	}
	counts, err := store.CountJobs(ctx)
	if err != nil {
		return res, err
	}
	res.Succeeded = int(counts[core.JobSucceeded])
	res.Samples, res.Failed = w.samples, w.failed
	if res.Drained, err = w.read(ctx, start); err != nil {
		return res, err
	}
	res.Warm, res.End = pick(res.Samples, o.soak.warm, sending)
	res.Load[1] = loadAverage()
	o.say("all %d jobs ended; waiting up to %s for the serve's goroutines to come back down to %d…", want, o.soak.quiet, res.Before)
	if res.After, res.Quieted, err = w.quiet(ctx, res.Before, o.soak.quiet); err != nil {
		return res, err
	}
	res.ServeCPU, res.ServePeakRSS = serve.figures()
	return res, nil
}

// pick returns the first sample at or after warm and the last one taken
// while the events were being sent (before sending had passed).
func pick(samples []sample, warm, sending time.Duration) (atWarm, atEnd sample) {
	for _, s := range samples {
		if atWarm.At == 0 && s.At >= warm {
			atWarm = s
		}
		if s.At <= sending {
			atEnd = s
		}
	}
	return atWarm, atEnd
}

// report is the soak's result as the command prints it.
func (r soakResult) report(o options) string {
	var b strings.Builder
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
	fmt.Fprintf(&b, "store            %s\n", r.Store)
	fmt.Fprintf(&b, "events sent      %d (%d/s for %s; sending took %s)\n", r.Sent, o.rate, o.duration, r.Sending.Round(time.Second))
	fmt.Fprintf(&b, "refused          %d\n", r.Refused)
	fmt.Fprintf(&b, "not succeeded    %d\n", r.unsucceeded())
	fmt.Fprintf(&b, "jobs succeeded   %d\n", r.Succeeded)
	fmt.Fprintf(&b, "serve RSS        %s at %s, %s at the end of sending (%s): %+.1f %%; %s after the last job; peak %s\n",
		mb(r.Warm.RSS), r.Warm.At.Round(time.Second), mb(r.End.RSS), r.End.At.Round(time.Second), 100*r.growth(),
		mb(r.Drained.RSS), mb(r.ServePeakRSS))
	fmt.Fprintf(&b, "goroutines       %d before the first event, %d after the last job (the fewest in %s, seen %s after it)\n", r.Before, r.After, o.soak.quiet, r.Quieted.Round(time.Second))
	fmt.Fprintf(&b, "serve process    %.1f CPU-seconds\n", r.ServeCPU.Seconds())
	fmt.Fprintf(&b, "load average     %s before the first event, %s after the last job (1 minute)\n", r.Load[0], r.Load[1])
	fmt.Fprintf(&b, "samples          %d every %s (%d unreadable):\n", len(r.Samples), o.soak.every, r.Failed)
	// About ten lines of the samples: how the figures moved.
	step := max(o.duration/10, o.soak.every)
	next := time.Duration(0)
	for _, s := range r.Samples {
		if s.At >= next {
			fmt.Fprintf(&b, "  %8s  RSS %s (files %s, Go heap %s)  %d goroutines\n", s.At.Round(time.Second), mb(s.RSS), mb(s.File), mb(s.GoHeap), s.Goroutines)
			next = s.At + step
		}
	}
	fmt.Fprintf(&b, "  drained   RSS %s (files %s, Go heap %s)  %d goroutines\n", mb(r.Drained.RSS), mb(r.Drained.File), mb(r.Drained.GoHeap), r.Drained.Goroutines)
	verdict := "met"
	if !r.ok() {
		verdict = "MISSED"
	}
	fmt.Fprintf(&b, "target           RSS at the end of sending within %.0f %% of the RSS at %s, no more goroutines after the last job than before the first event, every event's job succeeded: %s\n",
		100*soakGrowth, o.soak.warm, verdict)
	if r.Dir != "" {
		fmt.Fprintf(&b, "work directory   %s\n", r.Dir)
	}
	return b.String()
}

// watch reads a serve's figures: its resident set from /proc and its
// goroutines and outbox from /metrics.
type watch struct {
	pid     int
	metrics string // the serve's /metrics URL
	client  *http.Client

	// Written by sample only; read once it has returned.
	samples []sample
	failed  int
}

func newWatch(pid int, base string) *watch {
	return &watch{pid: pid, metrics: base + "/metrics", client: &http.Client{
		Timeout: 10 * time.Second,
		// One connection, kept: the serve's goroutine serving it is there
		// in every count alike.
		Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1},
	}}
}

func (w *watch) close() { w.client.CloseIdleConnections() }

// read takes one sample, its At the time since start.
func (w *watch) read(ctx context.Context, start time.Time) (sample, error) {
	rss, file, err := vmRSS(w.pid)
	if err != nil {
		return sample{}, err
	}
	m, err := w.scrape(ctx)
	if err != nil {
		return sample{}, err
	}
	g, ok := m["go_goroutines"]
	if !ok {
		return sample{}, errors.New("the serve's /metrics has no go_goroutines")
	}
	return sample{At: time.Since(start), RSS: rss, File: file, GoHeap: int64(m["go_memstats_heap_inuse_bytes"]), Goroutines: int(g)}, nil
}

// sample reads the figures every interval until ctx ends.
func (w *watch) sample(ctx context.Context, start time.Time, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s, err := w.read(ctx, start)
		if err != nil {
			if ctx.Err() == nil {
				w.failed++
			}
			continue
		}
		w.samples = append(w.samples, s)
	}
}

// idle waits until the serve's goroutine count is the same three reads in
// a row, half a second apart (its start has settled), at most 15 s, and
// returns the last count.
func (w *watch) idle(ctx context.Context) (int, error) {
	deadline := time.Now().Add(15 * time.Second)
	last, same := -1, 0
	for {
		s, err := w.read(ctx, time.Now())
		if err != nil {
			return 0, err
		}
		if s.Goroutines == last {
			same++
		} else {
			last, same = s.Goroutines, 0
		}
		if same >= 2 || time.Now().After(deadline) {
			return last, nil
		}
		if err := pause(ctx, 500*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// quiet reads the goroutine count every second until it is at most want
// or wait has passed, and returns the fewest seen and when. The fewest,
// not the last: what a run leaves that is not a leak comes and goes. The
// load generator's connections close at the serve's idle timeout (60 s),
// those the serve keeps to the fake model and Slack at net/http's (90 s),
// and the answers of the run's one channel are still being delivered, one
// a second (the outbox paces each channel), each delivery a goroutine
// while it waits for the channel's turn.
func (w *watch) quiet(ctx context.Context, want int, wait time.Duration) (fewest int, at time.Duration, err error) {
	start := time.Now()
	fewest = -1
	for {
		s, err := w.read(ctx, start)
		if err != nil {
			return 0, 0, err
		}
		if fewest < 0 || s.Goroutines < fewest {
			fewest, at = s.Goroutines, s.At
		}
		if fewest <= want || s.At >= wait {
			return fewest, at, nil
		}
		if err := pause(ctx, time.Second); err != nil {
			return 0, 0, err
		}
	}
}

// scrape reads the serve's /metrics into a map from each series (name
// and labels as written) to its value.
func (w *watch) scrape(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.metrics, nil)
	if err != nil {
		return nil, err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the serve's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the serve's metrics: %s", resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the serve's metrics: %w", err)
	}
	return m, nil
}

// vmRSS reads process pid's resident set size from /proc, and the part
// of it that is mapped files and shared memory.
func vmRSS(pid int) (rss, file int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read the serve's RSS: %w", err)
	}
	found := false
	for line := range strings.Lines(string(b)) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "RssFile" && name != "RssShmem") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("read the serve's RSS: %s %q: %w", name, rest, err)
		}
		if name == "VmRSS" {
			rss, found = kb<<10, true
		} else {
			file += kb << 10
		}
	}
	if !found {
		return 0, 0, errors.New("read the serve's RSS: no VmRSS in /proc/PID/status")
	}
	return rss, file, nil
}

// loadAverage is the machine's 1-minute load average, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
