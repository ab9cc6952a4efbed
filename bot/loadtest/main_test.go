package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/queue/redistest"
)

// TestLoadAgainstServe runs the load test as documented, at a low rate,
// against a `baton serve` process built from this module and a real
// Redis: every event sent is claimed, its job runs to the end, and the
// report carries the figures.
func TestLoadAgainstServe(t *testing.T) {
	redis := redistest.Start(t)
	bin := filepath.Join(t.TempDir(), "baton")
	// -race: the build shares the packages the race-enabled test run has
	// compiled already.
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-race", "-o", bin, "github.com/baton-bot/baton/bot").CombinedOutput(); err != nil {
		t.Fatalf("build baton: %v\n%s", err, out)
	}
	o := options{rate: 20, duration: 2 * time.Second, workers: 4, redisURL: "redis://" + redis.Addr() + "/0",
		baton: bin, settle: 60 * time.Second, target: 50 * time.Millisecond, progress: t.Output()}
	res, err := run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 40 || res.Refused != 0 || res.Lost != 0 || res.Succeeded != 40 {
		t.Errorf("sent %d, refused %d, lost %d, succeeded %d; want 40 sent, all claimed and succeeded", res.Sent, res.Refused, res.Lost, res.Succeeded)
	}
	if res.Max < res.P99 || res.P99 < res.P50 || res.P50 < 0 {
		t.Errorf("percentiles out of order: p50 %s, p99 %s, max %s", res.P50, res.P99, res.Max)
	}
	if res.ServePeakRSS == 0 || res.ServeCPU == 0 {
		t.Errorf("the serve process's figures were not read: %+v", res)
	}
	report := res.report(o)
	for _, want := range []string{"events sent      40 (20/s for 2s)", "lost             0", "event→claimed    p50 "} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
