package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/baton-bot/baton/core/postgres"
	"github.com/baton-bot/baton/core/sqlite"
)

// storeFlags returns the flag sets of `baton store`'s subcommands.
func (m *Main) storeFlags(from, to *string) []namedFlags {
	cp := m.newFlagSet("store")
	cp.StringVar(from, "from", "", "the SQLite store to copy, as `sqlite:PATH` (read only, never changed)")
	cp.StringVar(to, "to", "", "the empty PostgreSQL database to copy it into, as a postgres:// `URL` (DATABASE_URL)")
	sets := []namedFlags{{sub: "copy", fs: cp}}
	for _, s := range sets {
		onHelp(s.fs, func() { m.showHelp("store", sets...) })
	}
	return sets
}

// store runs `baton store copy --from sqlite:PATH --to postgres://…`: the
// move from one host's SQLite file to PostgreSQL. Everything is copied in
// one PostgreSQL transaction (postgres.Store.Import of sqlite.Dump), ids
// and sequence numbers kept; a target that holds data already is refused
// (exit 2). Baton should be stopped meanwhile: writes made to the SQLite
// file after the copy began are not in it.
func (m *Main) store(ctx context.Context, args []string) error {
	var from, to string
	sets := m.storeFlags(&from, &to)
	if len(args) == 0 {
		return usageErr("baton store: a subcommand is required: copy --from sqlite:PATH --to postgres://…")
	}
	if wantsHelp(args[:1]) {
		m.showHelp("store", sets...)
		return &exitError{code: exitOK, err: flag.ErrHelp, reported: true}
	}
	if args[0] != "copy" {
		return usageErr("baton store: unknown subcommand %q: want copy", args[0])
	}
	fs := sets[0].fs
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if err := noArgs("store copy", fs); err != nil {
		return err
	}
	path, ok := strings.CutPrefix(from, "sqlite:")
	if !ok || path == "" {
		return usageErr("baton store copy: --from must name a SQLite store as sqlite:PATH (sqlite:./data/baton.db)")
	}
	if u, err := url.Parse(to); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		// The URL is never shown: it may hold a password.
		return usageErr("baton store copy: --to must be a postgres:// or postgresql:// URL with a host")
	}
	target := redactURL(to)
	if m.describe != nil {
		return &exitError{code: exitOK, err: errors.New("baton store: described"), reported: true}
	}
	dst, err := postgres.Open(ctx, to, postgres.Options{Logger: m.Logger})
	if err != nil {
		if errors.Is(err, postgres.ErrAccessDenied) {
			return usageErr("baton store copy: --to: PostgreSQL at %s refused the credentials: %v", target, err)
		}
		return fmt.Errorf("baton store copy: open %s: %w", target, err)
	}
	defer dst.Close()
	counts, err := dst.Import(ctx, func(ctx context.Context, fn func(string, []string, []any) error) error {
		return sqlite.Dump(ctx, path, fn)
	})
	switch {
	case errors.Is(err, postgres.ErrNotEmpty):
		return usageErr("baton store copy: the target %s is not empty (%v): copy into a new database or schema", target, err)
	case err != nil:
		return fmt.Errorf("baton store copy: %s to %s: %w", path, target, err)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	for _, c := range counts {
		fmt.Fprintf(tw, "%s\t%d\n", c.Table, c.Rows)
	}
	tw.Flush()
	fmt.Fprintf(m.Stdout, "baton: copied the store %s to %s; start Baton with DATABASE_URL set to it\n", path, target)
	return nil
}
