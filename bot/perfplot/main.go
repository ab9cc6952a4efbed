// Command perfplot draws the figures of README.md's "Performance" section
// from the data files kept beside them in docs/perf:
//
//   - turn.csv → turn-overhead.png: the engine's overhead per agent turn
//     (BenchmarkTurnOverhead in core/engine) against the context's size;
//   - ingest.csv → ingest-p99.png: ingest latency against the store's size.
//
// With -bench it first runs the benchmark (`go test ./core/engine -run '^$'
// -bench TurnOverhead -benchmem -count N`, from the module's root), keeps
// the fastest of the N runs of each context size, rewrites turn.csv with
// them, the command, the time and the load average, and prints them as a
// README table, so that the table, the data and the plot come from one
// run. ingest.csv is written by hand: a row per run of the load test.
//
//	go run ./bot/perfplot                  # plot the data files as they are
//	go run ./bot/perfplot -bench -count 3  # measure the turn first
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"gonum.org/v1/plot"
)

func main() {
	dir := flag.String("dir", filepath.Join("docs", "perf"), "directory of the data files and the plots")
	bench := flag.Bool("bench", false, "run BenchmarkTurnOverhead first and rewrite turn.csv from its output")
	count := flag.Int("count", 1, "with -bench: runs of each context size (the fastest is kept)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dir, *bench, *count); err != nil {
		fmt.Fprintln(os.Stderr, "perfplot:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string, bench bool, count int) error {
	turnFile := filepath.Join(dir, "turn.csv")
	if bench {
		r, err := runBench(ctx, count, os.Stderr)
		if err != nil {
			return err
		}
		if err := writeTurns(turnFile, r); err != nil {
			return err
		}
		fmt.Print(turnTable(r.Turns))
	}
	turns, err := readTurns(turnFile)
	if err != nil {
		return err
	}
	ingest, err := readIngest(filepath.Join(dir, "ingest.csv"))
	if err != nil {
		return err
	}
	tp, err := turnPlot(turns)
	if err != nil {
		return err
	}
	ip, err := ingestPlot(ingest)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		p    *plot.Plot
	}{{"turn-overhead.png", tp}, {"ingest-p99.png", ip}} {
		path := filepath.Join(dir, f.name)
		if err := savePNG(path, f.p); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", path)
	}
	return nil
}
