package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Disk noise (-disk-noise) is another program writing to the disk the
// store is on: a loop in the load test's process appending 1 MB to a file
// in the run's directory (the filesystem of the serve's SQLite file) and
// fsyncing it, over and over, from before the first event is sent until
// the last job has been claimed. The file is cut back to nothing every
// noiseFileSize, so that the loop keeps allocating blocks (and so
// journaling them) as a log writer or a database's bulk load does, and
// the disk never fills. The loop writes at most -disk-noise-rate MB a
// second (default 100, a heavy neighbour: a database's bulk load, a busy
// log); unbounded, writing and syncing a megabyte in under a millisecond
// on a fast disk, the loop itself takes half a core of system time, which
// on a two-core machine is the serve's share of the CPU, not of the disk.

const (
	noiseWrite    = 1 << 20  // bytes of each write, fsynced before the next
	noiseFileSize = 64 << 20 // the file is truncated to zero at this size
)

// noiseResult is what the noise loop did while it ran.
type noiseResult struct {
	Writes  int           // 1 MB writes, each followed by an fsync
	Elapsed time.Duration // from its start to its stop
	// FsyncP50 … FsyncMax are the times its fsyncs took.
	FsyncP50, FsyncP99, FsyncMax time.Duration
	Err                          error // why the loop stopped early; nil when it ran until stopped
}

// MBPerSecond is the rate the loop wrote and synced at.
func (n noiseResult) MBPerSecond() float64 {
	if n.Elapsed <= 0 {
		return 0
	}
	return float64(n.Writes) * noiseWrite / (1 << 20) / n.Elapsed.Seconds()
}

// String is the report's line for the noise; empty when none ran.
func (n *noiseResult) String() string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "disk noise       %.1f MB/s: %d writes of 1 MB each fsynced in %.1f s, fsync p50 %s  p99 %s  max %s\n",
		n.MBPerSecond(), n.Writes, n.Elapsed.Seconds(), ms(n.FsyncP50), ms(n.FsyncP99), ms(n.FsyncMax))
	if n.Err != nil {
		fmt.Fprintf(&b, "disk noise       stopped early: %v\n", n.Err)
	}
	return b.String()
}

// startNoise starts the noise loop in dir when o asks for it and returns
// the function that stops it and returns what it did; without
// -disk-noise, stop does nothing and returns nil.
func (o options) startNoise(dir string) (stop func() *noiseResult, err error) {
	if !o.diskNoise {
		return func() *noiseResult { return nil }, nil
	}
	f, err := os.Create(filepath.Join(dir, "disk-noise"))
	if err != nil {
		return nil, fmt.Errorf("disk noise: %w", err)
	}
	quit, done := make(chan struct{}), make(chan *noiseResult, 1)
	pace := "as fast as it can"
	if o.noiseRate > 0 {
		pace = fmt.Sprintf("at most %d MB/s", o.noiseRate)
	}
	o.say("disk noise: writing 1 MB and fsyncing it in a loop, %s, in %s…", pace, dir)
	go func() { done <- noiseLoop(f, o.noiseRate, quit) }()
	return func() *noiseResult {
		close(quit)
		res := <-done
		f.Close()
		os.Remove(f.Name())
		return res
	}, nil
}

// noiseLoop appends a megabyte of random bytes to f and fsyncs it, at
// most rate times a second (0: no pause), until quit is closed or a write
// fails.
func noiseLoop(f *os.File, rate int, quit <-chan struct{}) *noiseResult {
	buf := make([]byte, noiseWrite)
	_, _ = rand.Read(buf)
	var (
		res   noiseResult
		syncs []time.Duration
		size  int64
	)
	start := time.Now()
	defer func() {
		res.Elapsed = time.Since(start)
		if len(syncs) > 0 {
			slices.Sort(syncs)
			pct := func(p float64) time.Duration { return syncs[int(p*float64(len(syncs)-1))] }
			res.FsyncP50, res.FsyncP99, res.FsyncMax = pct(0.50), pct(0.99), syncs[len(syncs)-1]
		}
	}()
	for {
		select {
		case <-quit:
			return &res
		default:
		}
		if size >= noiseFileSize {
			if err := f.Truncate(0); err != nil {
				res.Err = err
				return &res
			}
			size = 0
		}
		if _, err := f.WriteAt(buf, size); err != nil {
			res.Err = err
			return &res
		}
		size += noiseWrite
		t := time.Now()
		if err := f.Sync(); err != nil {
			res.Err = err
			return &res
		}
		syncs = append(syncs, time.Since(t))
		res.Writes++
		if rate > 0 {
			next := start.Add(time.Duration(res.Writes) * time.Second / time.Duration(rate))
			select {
			case <-quit:
				return &res
			case <-time.After(time.Until(next)):
			}
		}
	}
}
