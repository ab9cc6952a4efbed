package main

import (
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot"
)

func TestParseBenchKeepsTheFastestRun(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "bench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	turns, cpu, err := parseBench(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []turn{
		{Case: "tokens=10k", ContextTokens: 10003, NsPerOp: 561204, EncodeNsPerOp: 40112, RequestBytes: 45285, BytesPerOp: 228890, AllocsPerOp: 3499},
		{Case: "tokens=1M", ContextTokens: 1000154, NsPerOp: 3927849, EncodeNsPerOp: 2535841, RequestBytes: 3832215, BytesPerOp: 4061749, AllocsPerOp: 3333},
	}
	if diff := cmp.Diff(want, turns); diff != "" {
		t.Errorf("turns (-want +got):\n%s", diff)
	}
	if cpu != "AMD EPYC" {
		t.Errorf("cpu = %q, want AMD EPYC", cpu)
	}
}

func TestParseBenchRefusesIncompleteOutput(t *testing.T) {
	for _, tc := range []struct{ name, out string }{
		{"no result", "PASS\nok  \tgithub.com/baton-bot/baton/core/engine\t1.0s\n"},
		{"no context-tokens", "BenchmarkTurnOverhead/tokens=10k-2 \t 10 \t 579110 ns/op \t 41428 encode-ns/op \t 45285 request-bytes\n"},
		{"odd fields", "BenchmarkTurnOverhead/tokens=10k-2 \t 10 \t 579110\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if turns, _, err := parseBench(strings.NewReader(tc.out)); err == nil {
				t.Errorf("parseBench = %+v, want an error", turns)
			}
		})
	}
}

func TestTurnsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turn.csv")
	run := benchRun{Command: "go test", LoadAvg: "1.50", CPU: "AMD EPYC", Turns: []turn{
		{Case: "tokens=100k", ContextTokens: 100500, NsPerOp: 907770.5, EncodeNsPerOp: 205204, RequestBytes: 401533, BytesPerOp: 581219, AllocsPerOp: 3236},
	}}
	if err := writeTurns(path, run); err != nil {
		t.Fatal(err)
	}
	got, err := readTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(run.Turns, got); diff != "" {
		t.Errorf("turns read back (-want +got):\n%s", diff)
	}
}

func TestReadIngestRefusesAnUnknownMeasure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ingest.csv")
	data := strings.Join(ingestHeader, ",") + "\nsqlite,in-process,200,0,0,0,p50,3\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if rows, err := readIngest(path); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("readIngest = %+v, %v; want an error naming line 2", rows, err)
	}
}

// TestPlotsArePNG draws both figures, from the sample benchmark output and
// from the ingest data kept in the repository, and decodes the files.
func TestPlotsArePNG(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "bench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	turns, _, err := parseBench(f)
	if err != nil {
		t.Fatal(err)
	}
	ingest, err := readIngest(filepath.Join("..", "..", "docs", "perf", "ingest.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ingest) == 0 {
		t.Fatal("docs/perf/ingest.csv has no rows")
	}
	tp, err := turnPlot(turns)
	if err != nil {
		t.Fatal(err)
	}
	ip, err := ingestPlot(ingest)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, p := range map[string]*plot.Plot{"turn.png": tp, "ingest.png": ip} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := savePNG(path, p); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("decode %s: %v", name, err)
			}
			b := img.Bounds()
			if b.Dx() < 500 || b.Dy() < 300 {
				t.Errorf("%s is %d×%d pixels, want at least 500×300", name, b.Dx(), b.Dy())
			}
			// A blank canvas has one colour; axes, text, series and targets bring more.
			colours := map[color.RGBA64]bool{}
			for y := b.Min.Y; y < b.Max.Y; y += 3 {
				for x := b.Min.X; x < b.Max.X; x += 3 {
					r, g, bl, a := img.At(x, y).RGBA()
					colours[color.RGBA64{uint16(r), uint16(g), uint16(bl), uint16(a)}] = true
				}
			}
			if len(colours) < 4 {
				t.Errorf("%s has %d colours, want a drawing of at least 4", name, len(colours))
			}
		})
	}
}
