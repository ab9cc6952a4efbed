package outbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/outbox"
	"github.com/baton-bot/baton/core/postgres"
	"github.com/baton-bot/baton/core/sqlite"
)

// sharedStores opens two handles on one new store, as two processes
// would: the same SQLite file twice, or two pools on one PostgreSQL
// schema.
var sharedStores = []struct {
	name string
	open func(t *testing.T) (core.Store, core.Store)
}{
	{"sqlite", func(t *testing.T) (core.Store, core.Store) {
		dir := t.TempDir()
		open := func() core.Store {
			s, err := sqlite.Open(t.Context(), filepath.Join(dir, "baton.db"), sqlite.Options{WorkspaceRoot: filepath.Join(dir, "ws")})
			if err != nil {
				t.Fatalf("open store: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open()
	}},
	{"postgres", func(t *testing.T) (core.Store, core.Store) {
		u := postgresSchema(t)
		open := func() core.Store {
			s, err := postgres.Open(t.Context(), u, postgres.Options{WorkspaceRoot: t.TempDir()})
			if err != nil {
				t.Fatalf("open store: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open()
	}},
}

// postgresSchema returns the URL of a schema of the test's own on the
// machine's PostgreSQL (BATON_TEST_POSTGRES_URL), dropped at its end.
// Without a server the test is skipped, or fails with
// BATON_REQUIRE_POSTGRES=1.
func postgresSchema(t *testing.T) string {
	t.Helper()
	base := os.Getenv("BATON_TEST_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("BATON_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("no PostgreSQL at BATON_TEST_POSTGRES_URL: %v", err)
		}
		t.Skipf("no PostgreSQL (set BATON_TEST_POSTGRES_URL): %v", err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "outbox_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestDeliverersShareAStore: two deliverers of one platform, each on its
// own handle of one store as two gateway processes are, deliver a few
// hundred messages of many tasks, some of whose tries fail: each message
// is posted exactly once, each task's in order, and both deliverers take
// part.
func TestDeliverersShareAStore(t *testing.T) {
	for _, st := range sharedStores {
		t.Run(st.name, func(t *testing.T) {
			s1, s2 := st.open(t)
			ctx := t.Context()
			const tasks, each, channels = 40, 8, 5
			var tries atomic.Int64
			p := newPoster(chat.Limits{Post: 1000}, time.Now)
			p.fail = func(c call) error {
				if tries.Add(1)%7 == 0 {
					return fmt.Errorf("503 service unavailable")
				}
				return nil
			}
			var byOwner [2]atomic.Int64
			add := func(task core.Task, j int) {
				t.Helper()
				text := fmt.Sprintf("%d-%d", task.ID, j)
				if err := s1.AddOutbox(ctx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: chat.Payload{Text: text}.Encode()}); err != nil {
					t.Fatal(err)
				}
			}
			var all []core.Task
			for i := range tasks {
				ref := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: fmt.Sprint("C", i%channels), Thread: fmt.Sprint("1700.", i)}
				task, _, err := s1.EnsureTask(ctx, core.Task{Thread: ref})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, task)
				for j := range each / 2 {
					add(task, j)
				}
			}

			runCtx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for i, s := range []core.Store{s1, s2} {
				d := outbox.New(s, core.PlatformSlack, countingPoster{p, &byOwner[i]}, outbox.Config{
					Owner: fmt.Sprint("gateway-", i), Poll: 2 * time.Millisecond, Batch: 8, Concurrency: 4,
					Backoff: func(int) time.Duration { return time.Millisecond },
				})
				wg.Go(func() { _ = d.Run(runCtx) })
			}
			// The rest arrive while both deliver.
			for _, task := range all {
				for j := each / 2; j < each; j++ {
					add(task, j)
				}
			}
			deadline := time.Now().Add(2 * time.Minute)
			for len(p.Calls(true)) < tasks*each && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			// A little longer, so that a second post of a message would show.
			time.Sleep(50 * time.Millisecond)
			cancel()
			wg.Wait()

			posted := map[string]int{}
			last := map[string]int{} // thread → last message number posted
			for _, c := range p.Calls(true) {
				posted[c.Text]++
				task, n, _ := strings.Cut(c.Text, "-")
				j, _ := strconv.Atoi(n)
				if prev, ok := last[c.Thread]; ok && j != prev+1 {
					t.Errorf("task %s: message %d posted after %d", task, j, prev)
				}
				last[c.Thread] = j
			}
			for _, task := range all {
				for j := range each {
					if n := posted[fmt.Sprintf("%d-%d", task.ID, j)]; n != 1 {
						t.Errorf("message %d-%d posted %d times, want once", task.ID, j, n)
					}
				}
			}
			if p.Overlapped() {
				t.Error("two posts in one thread were under way at once")
			}
			if byOwner[0].Load() == 0 || byOwner[1].Load() == 0 {
				t.Errorf("posts by deliverer: %d and %d; want both to take part", byOwner[0].Load(), byOwner[1].Load())
			}
			t.Logf("%d posts, %d by the first deliverer, %d by the second, %d tries", len(p.Calls(true)), byOwner[0].Load(), byOwner[1].Load(), tries.Load())
		})
	}
}

// countingPoster counts the posts one deliverer makes through a shared
// poster.
type countingPoster struct {
	*poster
	n *atomic.Int64
}

func (p countingPoster) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	id, err := p.poster.Post(ctx, thread, text)
	if err == nil {
		p.n.Add(1)
	}
	return id, err
}
