package postgres

import (
	"flag"
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
// done. Each store is in a schema of its own, as the package's tests are,
// with the pool's default size:
//
//	go test ./core/postgres -run '^$' -bench HotPathLargeStore -benchtime 2000x -large.scale 10
func BenchmarkHotPathLargeStore(b *testing.B) {
	empty := newStore(b)
	url := newSchema(b)
	filled := openStore(b, url, Options{WorkspaceRoot: b.TempDir()})
	sizes := storefill.Scale(*largeScale)
	start := time.Now()
	if err := storefill.Postgres(b.Context(), url, sizes); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %s in %s", sizes, time.Since(start).Round(time.Second))
	storetest.BenchHotPath(b, empty, filled)
}
