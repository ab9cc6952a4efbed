package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// A turn is one context size's figures from BenchmarkTurnOverhead.
type turn struct {
	Case          string  // the sub-benchmark: "tokens=100k"
	ContextTokens int     // the movement's size before the turn
	NsPerOp       float64 // the whole turn
	EncodeNsPerOp float64 // the part of it spent building the request body
	RequestBytes  int     // the size of the request body
	BytesPerOp    int     // allocated per turn
	AllocsPerOp   int
}

// A benchRun is one run of the benchmark and how it was made.
type benchRun struct {
	Command string
	At      time.Time
	LoadAvg string // the 1-minute load average before the run
	CPU     string // as go test names it
	Turns   []turn
}

const benchName = "BenchmarkTurnOverhead"

// runBench runs BenchmarkTurnOverhead count times from the current
// directory (the module's root), copying go test's output to progress as
// it comes, and returns the fastest run of each context size.
func runBench(ctx context.Context, count int, progress io.Writer) (benchRun, error) {
	args := []string{"test", "./core/engine", "-run", "^$", "-bench", "TurnOverhead", "-benchmem", "-count", strconv.Itoa(count)}
	r := benchRun{
		Command: "go " + strings.ReplaceAll(strings.Join(args, " "), "^$", "'^$'"),
		At:      time.Now().UTC().Truncate(time.Second),
		LoadAvg: loadAvg(),
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout = io.MultiWriter(&out, progress)
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return benchRun{}, fmt.Errorf("%s: %w", r.Command, err)
	}
	turns, cpu, err := parseBench(&out)
	if err != nil {
		return benchRun{}, err
	}
	r.Turns, r.CPU = turns, cpu
	return r, nil
}

// loadAvg returns the 1-minute load average, or "unknown" off Linux.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// parseBench reads go test's benchmark output and returns the turns of
// BenchmarkTurnOverhead, one per context size in the order first seen: of
// several runs of a size (-count) the one with the fewest ns/op. Lines of
// other benchmarks are ignored; it fails when there is no turn, or a turn
// lacks one of the benchmark's metrics.
func parseBench(r io.Reader) (turns []turn, cpu string, err error) {
	index := map[string]int{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, "cpu: "); ok {
			cpu = strings.TrimSpace(c)
			continue
		}
		name, ok := strings.CutPrefix(line, benchName+"/")
		if !ok {
			continue
		}
		f := strings.Fields(name)
		if len(f) < 4 || len(f)%2 != 0 {
			return nil, "", fmt.Errorf("benchmark line %q: not name, N and value-unit pairs", line)
		}
		metrics := map[string]float64{}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, "", fmt.Errorf("benchmark line %q: %w", line, err)
			}
			metrics[f[i+1]] = v
		}
		for _, unit := range []string{"ns/op", "encode-ns/op", "request-bytes", "context-tokens"} {
			if _, ok := metrics[unit]; !ok {
				return nil, "", fmt.Errorf("benchmark line %q: no %s", line, unit)
			}
		}
		t := turn{
			Case:          trimProcs(f[0]),
			ContextTokens: int(metrics["context-tokens"]),
			NsPerOp:       metrics["ns/op"],
			EncodeNsPerOp: metrics["encode-ns/op"],
			RequestBytes:  int(metrics["request-bytes"]),
			BytesPerOp:    int(metrics["B/op"]),
			AllocsPerOp:   int(metrics["allocs/op"]),
		}
		if i, seen := index[t.Case]; !seen {
			index[t.Case] = len(turns)
			turns = append(turns, t)
		} else if t.NsPerOp < turns[i].NsPerOp {
			turns[i] = t
		}
	}
	if err := sc.Err(); err != nil {
		return nil, "", fmt.Errorf("read benchmark output: %w", err)
	}
	if len(turns) == 0 {
		return nil, "", errors.New("no " + benchName + " result in the benchmark output")
	}
	return turns, cpu, nil
}

// trimProcs drops go test's GOMAXPROCS suffix: "tokens=1M-2" → "tokens=1M".
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

var turnHeader = []string{"case", "context_tokens", "ns_per_op", "encode_ns_per_op", "request_bytes", "bytes_per_op", "allocs_per_op"}

// writeTurns writes the run to path as CSV, with comment lines saying how
// it was made.
func writeTurns(path string, r benchRun) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s, the fastest of each size's runs: %s\n", benchName, r.Command)
	fmt.Fprintf(&b, "# at %s on %s, 1-minute load average %s before the run; written by go run ./bot/perfplot -bench\n",
		r.At.Format(time.RFC3339), r.CPU, r.LoadAvg)
	w := csv.NewWriter(&b)
	_ = w.Write(turnHeader)
	for _, t := range r.Turns {
		_ = w.Write([]string{t.Case, strconv.Itoa(t.ContextTokens), ftoa(t.NsPerOp), ftoa(t.EncodeNsPerOp),
			strconv.Itoa(t.RequestBytes), strconv.Itoa(t.BytesPerOp), strconv.Itoa(t.AllocsPerOp)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write turns: %w", err)
	}
	return nil
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// readTurns reads a file writeTurns wrote.
func readTurns(path string) ([]turn, error) {
	var turns []turn
	err := readCSV(path, turnHeader, func(f []string) error {
		var p parser
		t := turn{
			Case: f[0], ContextTokens: p.int(f[1]), NsPerOp: p.float(f[2]), EncodeNsPerOp: p.float(f[3]),
			RequestBytes: p.int(f[4]), BytesPerOp: p.int(f[5]), AllocsPerOp: p.int(f[6]),
		}
		turns = append(turns, t)
		return p.err
	})
	return turns, err
}

// An ingestRow is one measurement of ingest against the store's size.
type ingestRow struct {
	Store       string  // "sqlite" or "postgres"
	Queue       string  // "in-process" or "redis"; empty where no queue takes part
	EventsPerS  int     // the load test's rate; 0 for a benchmark
	StoreEvents int     // job events in the store before the run
	StoreJobs   int     // jobs in it
	StoreTasks  int     // tasks in it
	Measure     string  // ingestP99 or hotPathMean
	Ms          float64 // the figure, in milliseconds
}

// The measures an ingest row may hold.
const (
	ingestP99   = "ingest-p99"    // go run ./bot/loadtest: p99 from an event sent to its job claimed
	hotPathMean = "hot-path-mean" // BenchmarkHotPathLargeStore: mean of the store's part of one event
)

var ingestHeader = []string{"store", "queue", "events_per_s", "store_events", "store_jobs", "store_tasks", "measure", "ms"}

// readIngest reads docs/perf/ingest.csv (see the comments at its top).
func readIngest(path string) ([]ingestRow, error) {
	var rows []ingestRow
	err := readCSV(path, ingestHeader, func(f []string) error {
		var p parser
		r := ingestRow{
			Store: f[0], Queue: f[1], StoreEvents: p.int(f[3]), StoreJobs: p.int(f[4]),
			StoreTasks: p.int(f[5]), Measure: f[6], Ms: p.float(f[7]),
		}
		if f[2] != "" {
			r.EventsPerS = p.int(f[2])
		}
		if r.Measure != ingestP99 && r.Measure != hotPathMean {
			return fmt.Errorf("measure %q is neither %s nor %s", r.Measure, ingestP99, hotPathMean)
		}
		rows = append(rows, r)
		return p.err
	})
	return rows, err
}

// parser parses a record's numbers and keeps the first error.
type parser struct{ err error }

func (p *parser) int(s string) int {
	v, err := strconv.Atoi(s)
	if p.err == nil {
		p.err = err
	}
	return v
}

func (p *parser) float(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if p.err == nil {
		p.err = err
	}
	return v
}

// readCSV reads path, whose first record must be header ('#' starts a
// comment line), and hands each further record to row. It fails on the
// first record row refuses, naming its line.
func readCSV(path string, header []string, row func([]string) error) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read data: %w", err)
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.Comment = '#'
	r.FieldsPerRecord = len(header)
	got, err := r.Read()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if strings.Join(got, ",") != strings.Join(header, ",") {
		return fmt.Errorf("%s: header %q, want %q", path, strings.Join(got, ","), strings.Join(header, ","))
	}
	for {
		f, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := row(f); err != nil {
			line, _ := r.FieldPos(0)
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
}
