// Package outbox delivers the messages Baton has to say on one chat
// platform. Everything Baton posts, edits, reacts or uploads is first
// written to the store's outbox (in the same transaction as the state
// change that caused it); a Deliverer reads the due messages of its
// platform and hands them to the platform's chat.Poster.
//
// Delivery is at least once and in order per task: a task's next message is
// never delivered before the previous one is settled (sent or given up),
// while different tasks are delivered concurrently within a bound. Posts in
// one channel are paced by the platform's Limits().Every. Failures are
// retried with backoff (a rate limit at the time the platform names) and
// never touch the job that wrote the message.
//
// Run one Deliverer per platform per database: two deliverers of one
// platform would deliver the same messages twice.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// Store is what the deliverer needs from the system of record;
// *sqlite.Store satisfies it. Implementations must be safe for concurrent
// use.
type Store interface {
	// Task returns the task with id (its thread and workspace).
	Task(ctx context.Context, id int64) (core.Task, error)
	// DueOutbox returns at most the first pending message of each task on
	// platform, due at now.
	DueOutbox(ctx context.Context, platform core.Platform, now time.Time, limit int) ([]core.OutboxMessage, error)
	// OutboxSent marks a message delivered.
	OutboxSent(ctx context.Context, id int64, platformMsgID string) error
	// OutboxRetry records a failed try (Tries + 1) and when to try again.
	OutboxRetry(ctx context.Context, id int64, next time.Time, lastErr string) error
	// OutboxFail gives up on a message.
	OutboxFail(ctx context.Context, id int64, lastErr string) error
	// StatusMessage returns the platform id of a job's status message, or
	// an error wrapping core.ErrNotFound when none was delivered yet.
	StatusMessage(ctx context.Context, jobID int64) (string, error)
	// RefMessage returns the platform id of the first update delivered
	// under ref in task taskID, or an error wrapping core.ErrNotFound.
	RefMessage(ctx context.Context, taskID int64, ref string) (string, error)
}

var _ Store = core.Store(nil)

// Config tunes a Deliverer. Zero fields take the defaults named.
type Config struct {
	// Poll is how often the outbox is read when nothing kicks the
	// deliverer; default 250 ms.
	Poll time.Duration
	// Batch is how many due messages one read returns at most; default 50.
	Batch int
	// Concurrency is how many deliveries (of different tasks) run at once;
	// default 8. A quarter of them (at least one) may run in one channel.
	Concurrency int
	// MaxTries is how many failed tries a message gets before it is given
	// up; default 8. A rate-limited try never gives a message up, though
	// the store counts it among the message's Tries.
	MaxTries int
	// Backoff is the delay before retrying after the n-th failed try (n ≥ 1);
	// default Backoff.
	Backoff func(try int) time.Duration
	// Logger receives delivery failures; nil discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Split cuts a post's text into parts of at most limit characters;
	// default Split.
	Split func(text string, limit int) []string
	// MaxFileBytes caps an uploaded file (files.max_bytes); 0: no cap. A
	// file over it is not uploaded: the thread gets a note naming it
	// instead (chat.UploadTooLarge in Locale).
	MaxFileBytes int64
	// Locale is the language of the notes the deliverer posts itself;
	// default "en".
	Locale string
}

// Default values of Config.
const (
	DefaultPoll        = 250 * time.Millisecond
	DefaultBatch       = 50
	DefaultConcurrency = 8
	DefaultMaxTries    = 8
	DefaultMaxParts    = 4
)

// Backoff is the default retry delay after the n-th failed try: 1 s doubling
// up to 5 min, with "equal jitter" (a random duration in [d/2, d]) so that
// messages failing together do not retry together.
func Backoff(try int) time.Duration {
	const base, ceiling = time.Second, 5 * time.Minute
	d := ceiling
	if try < 1 {
		try = 1
	}
	if try <= 9 { // 1 s · 2^9 > 5 min
		d = min(ceiling, base<<(try-1))
	}
	return d/2 + rand.N(d/2+1)
}

// minRateLimitWait is the least wait after a rate limit that named none.
const minRateLimitWait = time.Second

// settleTimeout bounds the store writes that record a delivery's outcome;
// they run even when Run's context has ended, so that a message posted just
// before shutdown is not posted again.
const settleTimeout = 5 * time.Second

// Deliverer delivers the outbox messages of one platform. Its methods are
// safe for concurrent use.
type Deliverer struct {
	store    Store
	platform core.Platform
	poster   chat.Poster
	cfg      Config
	log      *slog.Logger
	kick     chan struct{}
	sem      chan struct{} // one token per delivery running
	pace     pacer

	// perChannel bounds the deliveries under way in one channel, so that
	// posts waiting for a paced channel's turn cannot take every slot.
	perChannel int

	mu sync.Mutex
	// busy holds the tasks with a delivery running; guarded by mu.
	busy map[int64]bool
	// channels counts the deliveries running per channel; guarded by mu.
	channels map[string]int
	// parts holds, per outbox message id, how much of a split post was
	// delivered before a failure, so that a retry goes on from there
	// instead of posting the first parts again; guarded by mu.
	parts map[int64]progress
}

// progress is a split post delivered in part.
type progress struct {
	done    int    // parts delivered
	firstID string // platform id of the first part
}

// New returns a Deliverer of platform's outbox messages through poster.
func New(store Store, platform core.Platform, poster chat.Poster, cfg Config) *Deliverer {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.MaxTries <= 0 {
		cfg.MaxTries = DefaultMaxTries
	}
	if cfg.Backoff == nil {
		cfg.Backoff = Backoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Split == nil {
		cfg.Split = Split
	}
	if cfg.Locale == "" {
		cfg.Locale = "en"
	}
	return &Deliverer{
		store:      store,
		platform:   platform,
		poster:     poster,
		cfg:        cfg,
		log:        cfg.Logger.With("component", "outbox", "platform", string(platform)),
		kick:       make(chan struct{}, 1),
		sem:        make(chan struct{}, cfg.Concurrency),
		perChannel: max(1, cfg.Concurrency/4),
		busy:       map[int64]bool{},
		channels:   map[string]int{},
		parts:      map[int64]progress{},
	}
}

// Kick makes Run read the outbox at once instead of at its next poll. It
// never blocks; kicks made while a read is pending coalesce.
func (d *Deliverer) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run delivers due messages until ctx ends: it reads the outbox every Poll
// and whenever Kick is called or a delivery settles. It returns nil once ctx
// is done and the deliveries under way have returned; store errors are
// logged and the read retried at the next poll.
func (d *Deliverer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ticker := time.NewTicker(d.cfg.Poll)
	defer ticker.Stop()
	for {
		if _, err := d.round(ctx, &wg, d.Kick); err != nil && ctx.Err() == nil {
			d.log.Warn("read outbox", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-d.kick:
		}
	}
}

// Flush delivers the messages due now — one per task, as DueOutbox returns
// them — and waits until each is settled. It returns how many deliveries
// it started; a message of a task whose delivery is already under way (in
// Run) is left to it. A console session calls it before exiting; tests use
// it to step the deliverer.
func (d *Deliverer) Flush(ctx context.Context) (int, error) {
	var wg sync.WaitGroup
	n, err := d.round(ctx, &wg, nil)
	wg.Wait()
	return n, err
}

// round reads the due messages once and starts a delivery for each, adding
// them to wg; done, when set, is called after each delivery settles.
func (d *Deliverer) round(ctx context.Context, wg *sync.WaitGroup, done func()) (int, error) {
	// A task busy before the read may settle its message while the read
	// runs, and then the read may return that message again, already sent.
	// Skipping every task busy before the read avoids delivering it twice;
	// the settling delivery calls done, so the task is read again at once.
	d.mu.Lock()
	before := make(map[int64]bool, len(d.busy))
	for id := range d.busy {
		before[id] = true
	}
	d.mu.Unlock()

	msgs, err := d.store.DueOutbox(ctx, d.platform, d.cfg.Now(), d.cfg.Batch)
	if err != nil {
		return 0, err
	}
	started := 0
	for _, m := range msgs {
		if before[m.TaskID] {
			continue
		}
		task, err := d.store.Task(ctx, m.TaskID)
		if err != nil {
			return started, fmt.Errorf("task %d of outbox message %d: %w", m.TaskID, m.ID, err)
		}
		if !d.claim(task) {
			continue
		}
		select {
		case d.sem <- struct{}{}:
		case <-ctx.Done():
			d.release(task)
			return started, nil
		}
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.deliver(ctx, task, m)
			d.release(task)
			<-d.sem
			if done != nil {
				done() // after release, so that the next read finds the task free
			}
		}()
	}
	return started, nil
}

// claim marks task busy and reports whether it was free and its channel
// below perChannel deliveries under way.
func (d *Deliverer) claim(task core.Task) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := channelKey(task.Thread)
	if d.busy[task.ID] || d.channels[ch] >= d.perChannel {
		return false
	}
	d.busy[task.ID] = true
	d.channels[ch]++
	return true
}

func (d *Deliverer) release(task core.Task) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.busy, task.ID)
	ch := channelKey(task.Thread)
	if d.channels[ch]--; d.channels[ch] <= 0 {
		delete(d.channels, ch)
	}
}

// deliver sends m and records the outcome.
func (d *Deliverer) deliver(ctx context.Context, task core.Task, m core.OutboxMessage) {
	log := d.log.With("outbox_id", m.ID, "task_id", m.TaskID, "job_id", m.JobID, "kind", string(m.Kind))
	platformID, err := d.send(ctx, task, m)
	if err != nil && ctx.Err() != nil {
		// Shutting down: the message stays pending as it was and is
		// delivered at the next start; the try is not counted.
		log.Info("delivery interrupted by shutdown", "err", err)
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err == nil {
		d.forget(m.ID)
		if err := d.store.OutboxSent(sctx, m.ID, platformID); err != nil {
			log.Error("record delivery", "err", err)
		}
		return
	}

	now := d.cfg.Now()
	tries := m.Tries + 1
	var rl *chat.RateLimitedError
	switch {
	case errors.As(err, &rl):
		// Later posts in the channel wait too: posting there meanwhile
		// would only earn more 429s.
		after := max(rl.After, minRateLimitWait)
		d.pace.hold(task.Thread, now.Add(after))
		log.Warn("delivery rate limited", "tries", tries, "retry_after", after, "err", err)
		if serr := d.store.OutboxRetry(sctx, m.ID, now.Add(after), err.Error()); serr != nil {
			log.Error("record retry", "err", serr)
		}
	case errors.Is(err, chat.ErrPermanent):
		d.forget(m.ID)
		log.Error("delivery failed for good", "tries", tries, "err", err)
		if serr := d.store.OutboxFail(sctx, m.ID, err.Error()); serr != nil {
			log.Error("record failure", "err", serr)
		}
	case tries >= d.cfg.MaxTries:
		d.forget(m.ID)
		log.Error("delivery failed, giving up", "tries", tries, "err", err)
		if serr := d.store.OutboxFail(sctx, m.ID, err.Error()); serr != nil {
			log.Error("record failure", "err", serr)
		}
	default:
		wait := d.cfg.Backoff(tries)
		log.Warn("delivery failed, will retry", "tries", tries, "retry_in", wait, "err", err)
		if serr := d.store.OutboxRetry(sctx, m.ID, now.Add(wait), err.Error()); serr != nil {
			log.Error("record retry", "err", serr)
		}
	}
}

func (d *Deliverer) forget(id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.parts, id)
}
