package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/baton-bot/baton/core"
)

// usageOptions are the flags of `baton usage`.
type usageOptions struct {
	cf      commonFlags
	period  string
	channel string
	json    bool
}

// usage runs `baton usage`: the recorded usage of the model, summed by
// channel, user, model and day (and task), for a period.
func (m *Main) usageReport(ctx context.Context, args []string) error {
	var o usageOptions
	set := m.flagSet("usage", &o.cf, true)
	set.StringVar(&o.period, "period", "all", "the `period`: today, week (the last 7 days), month (the last 30) or all")
	set.StringVar(&o.channel, "channel", "", "only this platform-qualified `channel` (slack:C123)")
	set.BoolVar(&o.json, "json", false, "print JSON")
	onHelp(set, func() { m.showHelp("usage", namedFlags{fs: set}) })
	if err := parse(set, args); err != nil {
		return err
	}
	if err := noArgs("usage", set); err != nil {
		return err
	}
	from, to, ok := core.UsagePeriod(o.period, time.Now())
	if !ok {
		return usageErr("baton usage: --period: want today, week, month or all, got %q", o.period)
	}
	if err := m.setup("usage", o.cf); err != nil {
		return err
	}
	var rows []core.Usage
	// Reading creates no store: without one nothing was used.
	if _, err := os.Stat(storePath(m.Config)); storePath(m.Config) == "" || !errors.Is(err, fs.ErrNotExist) {
		st, err := openStore(ctx, m.Config, m.Logger)
		if err != nil {
			return err
		}
		defer st.Close()
		if rows, err = st.Usage(ctx, core.UsageFilter{Channel: o.channel, FromDay: from, ToDay: to}); err != nil {
			return err
		}
	}
	r := core.ReportUsage(rows)
	if o.json {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	writeUsage(m.Stdout, r)
	return nil
}

// writeUsage prints r as a few tables.
func writeUsage(w io.Writer, r core.UsageReport) {
	fmt.Fprintf(w, "total: %s\n", usageLine(r.Total))
	for _, g := range []struct {
		name string
		m    map[string]core.UsageSum
	}{{"channel", r.ByChannel}, {"user", r.ByRequester}, {"model", r.ByModel}, {"day", r.ByDay}} {
		if len(g.m) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nby %s:\n", g.name)
		for _, k := range slices.Sorted(maps.Keys(g.m)) {
			fmt.Fprintf(w, "  %-24s %s\n", k, usageLine(g.m[k]))
		}
	}
}

func usageLine(s core.UsageSum) string {
	return fmt.Sprintf("$%s  %d requests  %d prompt (%d cached) + %d completion tokens",
		strconv.FormatFloat(s.Cost, 'f', 4, 64), s.Requests, s.PromptTokens, s.CachedTokens, s.CompletionTokens)
}
