package sqlite

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/storefill"
	"github.com/baton-bot/baton/core/storetest"
)

// largeScale is the large store's size in tenths of a busy year
// (storefill.Scale): 10 makes the year (1M finished jobs, 300k tasks, 10M
// job events).
var largeScale = flag.Int("large.scale", 1, "size of BenchmarkHotPathLargeStore's large store, in tenths of a busy year (storefill.Scale; 10: 1M jobs, 300k tasks, 10M events)")

// BenchmarkHotPathLargeStore measures the store's part of one event's work
// (storetest.HotPath) on an empty store and on one filled with
// storefill.Scale(-large.scale), event by event in turn
// (storetest.BenchHotPath), to show the cost does not grow with the work
// done:
//
//	go test ./core/sqlite -run '^$' -bench HotPathLargeStore -benchtime 2000x -large.scale 10
func BenchmarkHotPathLargeStore(b *testing.B) {
	ctx := b.Context()
	open := func() (*Store, string) {
		dir := b.TempDir()
		path := filepath.Join(dir, "baton.db")
		s, err := Open(ctx, path, Options{WorkspaceRoot: filepath.Join(dir, "ws")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s, path
	}
	empty, _ := open()
	filled, path := open()
	sizes := storefill.Scale(*largeScale)
	start := time.Now()
	if err := storefill.SQLite(ctx, path, sizes); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %s in %s", sizes, time.Since(start).Round(time.Second))
	storetest.BenchHotPath(b, empty, filled)
}
