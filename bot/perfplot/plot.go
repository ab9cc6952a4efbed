package main

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	targetColor = color.Black
	dashed      = []vg.Length{vg.Points(6), vg.Points(3)}
)

// Targets of issue 25's per-turn overhead, in milliseconds.
var turnTargets = plotter.XYs{{X: 100_000, Y: 0.3}, {X: 1_000_000, Y: 0.5}}

// turnPlot draws the turn's time and the request body's share of it
// against the context's size (log scale), each point labelled with the
// request's size, and the targets. Every turn's context must be positive.
func turnPlot(turns []turn) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Engine overhead per agent turn (BenchmarkTurnOverhead)"
	p.X.Label.Text = "context (tokens, log scale)"
	p.Y.Label.Text = "time per turn (ms)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = tokenTicks{}
	p.Add(plotter.NewGrid())

	all, encode := make(plotter.XYs, len(turns)), make(plotter.XYs, len(turns))
	sizes := make([]string, len(turns))
	for i, t := range turns {
		if t.ContextTokens <= 0 {
			return nil, fmt.Errorf("turn %s: context of %d tokens cannot be on a log scale", t.Case, t.ContextTokens)
		}
		all[i] = plotter.XY{X: float64(t.ContextTokens), Y: t.NsPerOp / 1e6}
		encode[i] = plotter.XY{X: float64(t.ContextTokens), Y: t.EncodeNsPerOp / 1e6}
		sizes[i] = requestSize(t.RequestBytes)
	}
	for i, s := range []struct {
		name string
		xys  plotter.XYs
	}{
		{"whole turn (label: request body)", all},
		{"of which building the request body", encode},
	} {
		if err := addSeries(p, s.name, s.xys, plotutil.Color(i), plotutil.Shape(i), nil); err != nil {
			return nil, err
		}
	}
	if err := addSeries(p, "target: < 0.3 ms at 100k, < 0.5 ms at 1M", turnTargets, targetColor, draw.RingGlyph{}, dashed); err != nil {
		return nil, err
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: all, Labels: sizes})
	if err != nil {
		return nil, err
	}
	labels.Offset = vg.Point{X: -vg.Points(12), Y: vg.Points(6)}
	p.Add(labels)

	lo, hi := float64(turnTargets[0].X), float64(turnTargets[1].X)
	top := 0.6
	for _, xy := range all {
		lo, hi, top = min(lo, xy.X), max(hi, xy.X), max(top, xy.Y)
	}
	p.X.Min, p.X.Max = lo/1.5, hi*1.5
	p.Y.Min, p.Y.Max = 0, top*1.4 // room above for the legend
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	return p, nil
}

// addSeries adds a line through xys with a glyph on each point.
func addSeries(p *plot.Plot, name string, xys plotter.XYs, c color.Color, shape draw.GlyphDrawer, dashes []vg.Length) error {
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("series %s: %w", name, err)
	}
	line.Color, line.Dashes = c, dashes
	points.Color, points.Shape = c, shape
	p.Add(line, points)
	p.Legend.Add(name, line, points)
	return nil
}

// tokenTicks marks a log axis of token counts at 1 and 3 of each decade
// ("10k", "30k", "100k") and the rest of the decade with unlabelled ticks.
type tokenTicks struct{}

func (tokenTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for d := math.Pow(10, math.Floor(math.Log10(lo))); d <= hi; d *= 10 {
		for m := 1.0; m < 10; m++ {
			v := m * d
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 3 {
				t.Label = tokenCount(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// tokenCount writes 300000 as "300k" and 1000000 as "1M".
func tokenCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

// requestSize writes a body's size as the README does: "401 KB", "3.83 MB".
func requestSize(n int) string {
	if n >= 1e6 {
		return fmt.Sprintf("%.2f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%d KB", n/1000)
}

// The figure's store sizes are in millions of job events; a busy year's
// store (issue 25) holds 10 million.
const yearEvents = 10_000_000

// ingestPlot draws each series of rows (a store, queue, rate and measure)
// against the store's size in job events: every run as a point, a line
// through the means of a size's runs, and the series' target of staying
// within 25 % of its empty store's figure as a dashed line of its colour;
// the ingest target, p99 < 50 ms, in red.
func ingestPlot(rows []ingestRow) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Ingest latency against the store's size"
	p.X.Label.Text = "job events in the store (millions; a busy year is 10)"
	p.Y.Label.Text = "ms (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())

	type key struct {
		store, queue, measure string
		rate                  int
	}
	var keys []key
	series := map[key][]ingestRow{}
	xMax, yMin, yMax := float64(yearEvents)/1e6, 1.0, 100.0
	for _, r := range rows {
		k := key{r.Store, r.Queue, r.Measure, r.EventsPerS}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		series[k] = append(series[k], r)
		xMax, yMin, yMax = max(xMax, float64(r.StoreEvents)/1e6), min(yMin, r.Ms/2), max(yMax, r.Ms*2)
	}
	xMin := -xMax / 30
	anyP99 := false
	for i, k := range keys {
		name := seriesName(k.store, k.queue, k.measure, k.rate)
		c := plotutil.Color(i)
		runs, means := sizeMeans(series[k])
		points, err := plotter.NewScatter(runs)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", name, err)
		}
		points.Color, points.Shape = c, plotutil.Shape(i)
		line, err := plotter.NewLine(means)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", name, err)
		}
		line.Color = c
		p.Add(line, points)
		p.Legend.Add(name, line, points)
		if means[0].X == 0 {
			target := horizontal(xMin, xMax, means[0].Y*1.25)
			target.Color, target.Dashes = c, dashed
			p.Add(target)
			p.Legend.Add("its target: within 25 % of its empty store's", target)
		}
		anyP99 = anyP99 || k.measure == ingestP99
	}
	if anyP99 {
		target := horizontal(xMin, xMax, 50)
		target.Color, target.Dashes = targetColor, dashed
		p.Add(target)
		p.Legend.Add("target: p99 < 50 ms", target)
	}
	p.X.Min, p.X.Max = xMin, xMax*1.03
	p.Y.Min, p.Y.Max = yMin, yMax*8 // room above for the legend
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	return p, nil
}

// sizeMeans returns the series' runs as points (millions of events, ms)
// and the mean of each store size's runs, by size.
func sizeMeans(rows []ingestRow) (runs, means plotter.XYs) {
	for _, r := range rows {
		runs = append(runs, plotter.XY{X: float64(r.StoreEvents) / 1e6, Y: r.Ms})
	}
	sorted := slices.SortedFunc(slices.Values(runs), func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	for _, xy := range sorted {
		if n := len(means); n > 0 && means[n-1].X == xy.X {
			continue
		}
		var sum float64
		var k int
		for _, o := range sorted {
			if o.X == xy.X {
				sum, k = sum+o.Y, k+1
			}
		}
		means = append(means, plotter.XY{X: xy.X, Y: sum / float64(k)})
	}
	return runs, means
}

func horizontal(x0, x1, y float64) *plotter.Line {
	l, _ := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}}) // two finite points: never fails
	return l
}

// seriesName says in words what a series of ingest.csv measured.
func seriesName(store, queue, measure string, rate int) string {
	store = cmp.Or(map[string]string{"sqlite": "SQLite", "postgres": "PostgreSQL"}[store], store)
	queue = cmp.Or(map[string]string{"redis": "Redis"}[queue], queue)
	if measure == hotPathMean {
		return store + ": the store's work per event, mean (HotPathLargeStore)"
	}
	return fmt.Sprintf("%s, %s queue, %d events/s: p99 sent to claimed (load test)", store, queue, rate)
}

// savePNG writes p to path as a PNG of 17 × 11 cm at 150 dpi.
func savePNG(path string, p *plot.Plot) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writePNG(f, p); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func writePNG(w io.Writer, p *plot.Plot) error {
	c := vgimg.NewWith(vgimg.UseWH(17*vg.Centimeter, 11*vg.Centimeter), vgimg.UseDPI(150))
	p.Draw(draw.New(c))
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

// turnTable writes the turns as the rows of README.md's table of the
// benchmark.
func turnTable(turns []turn) string {
	var b strings.Builder
	b.WriteString("| context | request | turn (ns/op) | encode (ns/op) | target | B/op | allocs/op |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, t := range turns {
		target := ""
		for _, xy := range turnTargets {
			if t.Case == "tokens="+tokenCount(xy.X) {
				target = fmt.Sprintf("< %g ms", xy.Y)
			}
		}
		fmt.Fprintf(&b, "| %s tokens | %s | %s (%.2f ms) | %s (%.2f ms) | %s | %s | %s |\n",
			humanize.Comma(int64(t.ContextTokens)), requestSize(t.RequestBytes),
			humanize.Comma(int64(t.NsPerOp)), t.NsPerOp/1e6, humanize.Comma(int64(t.EncodeNsPerOp)), t.EncodeNsPerOp/1e6,
			target, humanize.Comma(int64(t.BytesPerOp)), humanize.Comma(int64(t.AllocsPerOp)))
	}
	return b.String()
}
