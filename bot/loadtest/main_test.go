package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baton-bot/baton/core/postgres/pgtest"
	"github.com/baton-bot/baton/queue/redistest"
)

var (
	buildOnce sync.Once
	buildDir  string // holds the binary; removed by TestMain
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// batonBin builds this module's baton once for the package's tests.
// -race: the build shares the packages the race-enabled test run has
// compiled already.
func batonBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "baton-loadtest-"); buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "baton")
		if out, err := exec.Command("go", "build", "-race", "-o", buildBin, "github.com/baton-bot/baton/bot").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build baton: %v", buildErr)
	}
	return buildBin
}

// TestLoadAgainstServe runs the load test as documented, at a low rate,
// against a `baton serve` process built from this module, a real Redis
// and SQLite: every event sent is claimed, its job runs to the end, and
// the report carries the figures.
func TestLoadAgainstServe(t *testing.T) {
	redis := redistest.Start(t)
	o := options{rate: 20, duration: 2 * time.Second, workers: 4, redisURL: "redis://" + redis.Addr() + "/0",
		baton: batonBin(t), settle: 60 * time.Second, target: 50 * time.Millisecond, progress: t.Output()}
	res, err := run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkIngest(t, o, res, 40)
	if !strings.HasPrefix(res.Store, "SQLite ") {
		t.Errorf("store = %q, want SQLite", res.Store)
	}
}

// TestLoadWithDiskNoise: -disk-noise writes and fsyncs in the run's
// directory while the events are sent and claimed, the report tells its
// rate, and the events are all claimed and succeed as without it (how
// fast is the README's figure, not this test's).
func TestLoadWithDiskNoise(t *testing.T) {
	o := options{rate: 20, duration: time.Second, workers: 4, diskNoise: true, keep: true,
		baton: batonBin(t), settle: 60 * time.Second, target: 50 * time.Millisecond, progress: t.Output()}
	res, err := run(t.Context(), o)
	if res.Dir != "" {
		defer os.RemoveAll(res.Dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkIngest(t, o, res, 20)
	if res.Noise == nil || res.Noise.Err != nil || res.Noise.Writes == 0 || res.Noise.Elapsed < o.duration || res.Noise.MBPerSecond() <= 0 {
		t.Fatalf("noise = %+v; want writes made for the whole run, without an error", res.Noise)
	}
	if res.Noise.FsyncMax < res.Noise.FsyncP50 {
		t.Errorf("fsync times out of order: %+v", res.Noise)
	}
	if report := res.report(o); !strings.Contains(report, fmt.Sprintf("disk noise       %.1f MB/s: %d writes of 1 MB each fsynced", res.Noise.MBPerSecond(), res.Noise.Writes)) {
		t.Errorf("report lacks the noise's rate:\n%s", report)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "disk-noise")); !os.IsNotExist(err) {
		t.Errorf("the noise's file is still there after the run (%v)", err)
	}
}

// TestLoadOnPostgres: with -database-url the serve's store is a schema of
// the run's own on that server, read back through core/postgres, and the
// schema is gone once the run has ended.
func TestLoadOnPostgres(t *testing.T) {
	server := pgtest.Server(t)
	o := options{rate: 20, duration: time.Second, workers: 4, databaseURL: server,
		baton: batonBin(t), settle: 60 * time.Second, target: 50 * time.Millisecond, progress: t.Output()}
	res, err := run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkIngest(t, o, res, 20)
	schema, ok := strings.CutPrefix(res.Store, "PostgreSQL schema ")
	if !ok {
		t.Fatalf("store = %q, want a PostgreSQL schema", res.Store)
	}
	if n := schemas(t, server, schema); n != 0 {
		t.Errorf("schema %s is still there after the run", schema)
	}
}

// TestJobRate runs the job-rate mode with one gateway and one, then two
// worker processes on PostgreSQL and a Redis of the run's own: every
// event becomes one job that succeeds once, each job made the scripted
// model's two tool calls, and the report carries a rate for each count.
// (That two workers are faster is not asserted: on a busy machine they
// need not be.)
func TestJobRate(t *testing.T) {
	server := pgtest.Server(t)
	o := options{rate: 10, duration: time.Second, workers: 2, databaseURL: server, processes: []int{1, 2},
		think: 10 * time.Millisecond, baton: batonBin(t), settle: 60 * time.Second, progress: t.Output()}
	res, err := runRates(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results, want one for each of 1 and 2 workers", len(res))
	}
	for i, r := range res {
		if r.Processes != o.processes[i] || !r.ok() || r.Sent != 10 || r.Succeeded != 10 || r.ClaimedTwice != 0 {
			t.Errorf("%d workers: %+v; want 10 sent, each one job that succeeded, claimed once", o.processes[i], r)
		}
		if r.ToolCalls != 2*r.Succeeded {
			t.Errorf("%d workers: %d tool calls for %d jobs, want a Write and a Read each", r.Processes, r.ToolCalls, r.Succeeded)
		}
		if r.JobsPerSecond <= 0 || r.Window <= 0 || r.Drain < r.Window || r.CPU <= 0 {
			t.Errorf("%d workers: figures missing: %+v", r.Processes, r)
		}
		schema, _ := strings.CutPrefix(r.Store, "PostgreSQL schema ")
		if n := schemas(t, server, schema); n != 0 {
			t.Errorf("schema %s is still there after the run", schema)
		}
	}
	report := rateReport(res, o)
	for _, want := range []string{"PostgreSQL, a schema per run", "Write notes/load.md", "\n1        10    10 ", "\n2        10    10 "} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

func checkIngest(t *testing.T, o options, res result, want int) {
	t.Helper()
	if res.Sent != want || res.Refused != 0 || res.Lost != 0 || res.Succeeded != want {
		t.Errorf("sent %d, refused %d, lost %d, succeeded %d; want %d sent, all claimed and succeeded", res.Sent, res.Refused, res.Lost, res.Succeeded, want)
	}
	if res.Max < res.P99 || res.P99 < res.P50 || res.P50 < 0 {
		t.Errorf("percentiles out of order: p50 %s, p99 %s, max %s", res.P50, res.P99, res.Max)
	}
	if res.ServePeakRSS == 0 || res.ServeCPU == 0 {
		t.Errorf("the serve process's figures were not read: %+v", res)
	}
	report := res.report(o)
	for _, want := range []string{fmt.Sprintf("events sent      %d (20/s for %s)", want, o.duration), "lost             0", "event→claimed    p50 "} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// schemas counts the schemas named name on server.
func schemas(t *testing.T, server, name string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSoak runs the soak mode scaled down to seconds against a `baton
// serve` process on SQLite and the in-process queue: every event's job
// succeeds, the serve's RSS and goroutines are read throughout, at the
// warm-up mark and at the end of sending, and the report carries them.
// (Whether the targets are met is not asserted: a few seconds are too
// short for a steady state.)
func TestSoak(t *testing.T) {
	o := options{rate: 20, duration: 6 * time.Second, workers: 4, baton: batonBin(t), settle: 60 * time.Second,
		soak: soakOptions{on: true, warm: 2 * time.Second, every: 500 * time.Millisecond, quiet: 3 * time.Second}, progress: t.Output()}
	res, err := runSoak(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 120 || res.Refused != 0 || res.Succeeded != 120 || res.unsucceeded() != 0 {
		t.Errorf("sent %d, refused %d, succeeded %d; want 120 sent, each one job that succeeded", res.Sent, res.Refused, res.Succeeded)
	}
	if len(res.Samples) < 8 || res.Failed != 0 {
		t.Errorf("%d samples, %d unreadable; want one every 0.5 s of the 6 s and more, all read", len(res.Samples), res.Failed)
	}
	for _, s := range res.Samples {
		if s.RSS < 1<<20 || s.File <= 0 || s.File >= s.RSS || s.GoHeap < 1<<20 || s.Goroutines < 10 {
			t.Errorf("sample %+v; want the serve's figures", s)
		}
	}
	if res.Warm.At < o.soak.warm || res.End.At < res.Warm.At || res.End.At > res.Sending || res.Warm.RSS == 0 || res.End.RSS == 0 {
		t.Errorf("warm-up sample %+v, end sample %+v; want one at 2 s or just after and the last one of the sending", res.Warm, res.End)
	}
	if res.Before < 10 || res.After < 10 || res.Drained.RSS == 0 {
		t.Errorf("goroutines %d before, %d after, drained %+v; want the serve's counts", res.Before, res.After, res.Drained)
	}
	report := res.report(o)
	for _, want := range []string{"events sent      120 (20/s for 6s; sending took ", "not succeeded    0", "serve RSS        ", "at the end of sending", fmt.Sprintf("goroutines       %d before the first event, %d after", res.Before, res.After), "target           RSS at the end of sending within 10 % of the RSS at 2s"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestSoakVerdict: the soak's targets are the RSS at the end within 10 %
// of the warm-up's, no more goroutines after than before, and every
// event's job succeeded.
func TestSoakVerdict(t *testing.T) {
	met := soakResult{Sent: 100, Succeeded: 100, Warm: sample{RSS: 100 << 20}, End: sample{RSS: 110 << 20}, Before: 40, After: 40}
	for _, tc := range []struct {
		name string
		edit func(*soakResult)
		want bool
	}{
		{"growth of 10 %, same goroutines", func(*soakResult) {}, true},
		{"fewer goroutines, RSS down", func(r *soakResult) { r.After, r.End.RSS = 35, 90<<20 }, true},
		{"growth over 10 %", func(r *soakResult) { r.End.RSS = 111 << 20 }, false},
		{"one goroutine more", func(r *soakResult) { r.After = 41 }, false},
		{"a job not succeeded", func(r *soakResult) { r.Succeeded = 99 }, false},
		{"refused events are not expected to succeed", func(r *soakResult) { r.Refused, r.Succeeded = 3, 97 }, true},
		{"no warm-up sample", func(r *soakResult) { r.Warm = sample{} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := met
			tc.edit(&r)
			if got := r.ok(); got != tc.want {
				t.Errorf("ok() = %v, want %v for %+v", got, tc.want, r)
			}
		})
	}
}
