package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/outbox"
	"github.com/baton-bot/baton/core/sqlite"
)

// t0 is where the tests' clock starts.
var t0 = time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)

// clock is a clock the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time // guarded by mu
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// call is one call a poster received.
type call struct {
	Op      string // post, update, react, upload
	Channel string
	Thread  string
	MsgID   string // update, react: the message acted on
	Text    string // post, update: the text; upload: the comment
	Emoji   string
	Remove  bool
	Name    string // upload
	Content string // upload
	Key     string // keyed post: its key
	ID      string // the id the call returned
	Buttons int    // post: how many buttons went with it
	Err     bool   // the call failed
	At      time.Time
}

// poster is a chat.Poster that records its calls. fail, when set, is asked
// before each call completes and may fail it; it runs outside the lock and
// may block.
type poster struct {
	limits chat.Limits
	clock  func() time.Time

	mu     sync.Mutex
	calls  []call          // guarded by mu
	n      int             // ids handed out; guarded by mu
	active map[string]bool // threads with a call under way; guarded by mu
	// overlap records a call made in a thread while another was under way
	// there; guarded by mu.
	overlap bool
	fail    func(c call) error // set before the deliverer starts
}

var _ chat.Poster = (*poster)(nil)

func newPoster(limits chat.Limits, clock func() time.Time) *poster {
	return &poster{limits: limits, clock: clock, active: map[string]bool{}}
}

// do records c and returns its id.
func (p *poster) do(c call, prefix string) (string, error) {
	key := c.Channel + "/" + c.Thread
	p.mu.Lock()
	if p.active[key] {
		p.overlap = true
	}
	p.active[key] = true
	c.At = p.clock()
	p.mu.Unlock()

	var err error
	if p.fail != nil {
		err = p.fail(c)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.active, key)
	c.Err = err != nil
	if err == nil {
		p.n++
		c.ID = fmt.Sprintf("%s%d", prefix, p.n)
	}
	p.calls = append(p.calls, c)
	return c.ID, err
}

func (p *poster) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	return p.do(call{Op: "post", Channel: thread.Channel, Thread: thread.Thread, Text: text}, "P")
}

func (p *poster) Update(ctx context.Context, thread core.ThreadRef, msgID, text string) error {
	_, err := p.do(call{Op: "update", Channel: thread.Channel, Thread: thread.Thread, MsgID: msgID, Text: text}, "U")
	return err
}

func (p *poster) React(ctx context.Context, thread core.ThreadRef, msgID, emoji string, remove bool) error {
	_, err := p.do(call{Op: "react", Channel: thread.Channel, Thread: thread.Thread, MsgID: msgID, Emoji: emoji, Remove: remove}, "R")
	return err
}

func (p *poster) Upload(ctx context.Context, thread core.ThreadRef, name string, r io.Reader, size int64, comment string) (string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	if int64(len(b)) != size {
		return "", fmt.Errorf("upload %s: read %d bytes, size says %d", name, len(b), size)
	}
	return p.do(call{Op: "upload", Channel: thread.Channel, Thread: thread.Thread, Name: name, Content: string(b), Text: comment}, "F")
}

func (p *poster) Limits() chat.Limits { return p.limits }

// keyedPoster is a poster whose posts carry keys (chat.KeyedPoster) and
// that finds them again (chat.DeliveryFinder), as Slack's metadata does.
type keyedPoster struct {
	*poster
	finds atomic.Int64 // FindDelivered calls
}

var (
	_ chat.KeyedPoster    = (*keyedPoster)(nil)
	_ chat.DeliveryFinder = (*keyedPoster)(nil)
)

func (p *keyedPoster) PostKeyed(ctx context.Context, thread core.ThreadRef, text string, buttons []chat.Button, key string) (string, error) {
	return p.do(call{Op: "post", Channel: thread.Channel, Thread: thread.Thread, Text: text, Key: key, Buttons: len(buttons)}, "P")
}

func (p *keyedPoster) FindDelivered(ctx context.Context, thread core.ThreadRef, key string) (string, bool, error) {
	p.finds.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.calls {
		if !c.Err && c.Key == key && c.Channel == thread.Channel && c.Thread == thread.Thread {
			return c.ID, true, nil
		}
	}
	return "", false, nil
}

// Calls returns the calls so far; ok selects only the ones that succeeded.
func (p *poster) Calls(ok bool) []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []call
	for _, c := range p.calls {
		if !ok || !c.Err {
			out = append(out, c)
		}
	}
	return out
}

func (p *poster) Overlapped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.overlap
}

// harness is a deliverer on a real store with a recording poster.
type harness struct {
	store  *sqlite.Store
	db     *sql.DB // reads the outbox's ids
	clock  *clock
	poster *poster
	d      *outbox.Deliverer
}

// newHarness builds a Slack deliverer. cfg.Now and cfg.Backoff default to
// the test clock and a constant second; fail is the poster's failure hook.
func newHarness(t testing.TB, limits chat.Limits, cfg outbox.Config, fail func(call) error) *harness {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "baton.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{WorkspaceRoot: filepath.Join(dir, "ws")})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	db, err := sql.Open("sqlite", path) // the driver core/sqlite registers
	if err != nil {
		t.Fatalf("open database: %v", err)
	}
	t.Cleanup(func() { db.Close() })

	h := &harness{store: s, db: db, clock: newClock()}
	if cfg.Now == nil {
		cfg.Now = h.clock.Now
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return time.Second }
	}
	h.poster = newPoster(limits, cfg.Now)
	h.poster.fail = fail
	h.d = outbox.New(s, core.PlatformSlack, h.poster, cfg)
	return h
}

var threadN atomic.Int64

// task creates a Slack task in channel.
func (h *harness) task(t testing.TB, channel string) core.Task {
	t.Helper()
	ref := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: channel, Thread: fmt.Sprintf("1700.%d", threadN.Add(1))}
	task, _, err := h.store.EnsureTask(t.Context(), core.Task{Thread: ref, OwnerUser: "slack:U1", Title: "a task"})
	if err != nil {
		t.Fatalf("EnsureTask: %v", err)
	}
	return task
}

// job creates a queued job of task.
func (h *harness) job(t testing.TB, task core.Task) core.Job {
	t.Helper()
	j, err := h.store.CreateJob(t.Context(), core.Job{TaskID: task.ID, Piece: "default", Instruction: "do it"})
	if err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	return j
}

// add stores one message and returns its id.
func (h *harness) add(t testing.TB, task core.Task, jobID int64, kind core.OutboxKind, p chat.Payload) int64 {
	t.Helper()
	m := core.OutboxMessage{TaskID: task.ID, JobID: jobID, Kind: kind, Payload: p.Encode()}
	if err := h.store.AddOutbox(t.Context(), m); err != nil {
		t.Fatalf("AddOutbox: %v", err)
	}
	var id int64
	if err := h.db.QueryRowContext(t.Context(), `SELECT MAX(id) FROM outbox`).Scan(&id); err != nil {
		t.Fatalf("last outbox id: %v", err)
	}
	return id
}

func (h *harness) post(t testing.TB, task core.Task, text string) int64 {
	t.Helper()
	return h.add(t, task, 0, core.OutboxPost, chat.Payload{Text: text})
}

// msg returns the stored message id.
func (h *harness) msg(t testing.TB, id int64) core.OutboxMessage {
	t.Helper()
	m, err := h.store.Outbox(t.Context(), id)
	if err != nil {
		t.Fatalf("Outbox(%d): %v", id, err)
	}
	return m
}

// flush runs one round of deliveries and returns how many started.
func (h *harness) flush(t testing.TB) int {
	t.Helper()
	n, err := h.d.Flush(t.Context())
	if err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return n
}

// rounds flushes n times, moving the clock on by step after each round.
func (h *harness) rounds(t testing.TB, n int, step time.Duration) {
	t.Helper()
	for range n {
		h.flush(t)
		h.clock.Advance(step)
	}
}

// state returns a message's state and tries.
func (h *harness) state(t testing.TB, id int64) (core.OutboxState, int) {
	t.Helper()
	m := h.msg(t, id)
	return m.State, m.Tries
}

// eventually waits for cond, failing the test when it does not hold within
// a generous bound; it is a guard against hanging, not a timing assertion.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// texts returns the Op:Text of calls.
func texts(calls []call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Op+":"+c.Text)
	}
	return out
}
