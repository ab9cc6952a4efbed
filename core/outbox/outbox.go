// Package outbox delivers the messages Baton has to say on one chat
// platform. Everything Baton posts, edits, reacts or uploads is first
// written to the store's outbox (in the same transaction as the state
// change that caused it); a Deliverer reads the due messages of its
// platform and hands them to the platform's chat.Poster.
//
// Delivery is in order per task: a task's next message is never delivered
// before the previous one is settled (sent or given up), while different
// tasks are delivered concurrently within a bound. Posts in one channel
// are paced by the platform's Limits().Every. Failures are retried with
// backoff (a rate limit at the time the platform names) and never touch
// the job that wrote the message.
//
// Any number of Deliverers of one platform may share a store, in one
// process or in many (several `baton gateway` processes on one
// PostgreSQL store): each message is claimed by one of them for a lease
// (Config.Owner, Config.Lease; core.OutboxStore.ClaimOutbox) and no other
// takes it until the claim is settled, handed back or expired. A delivery
// must end before its lease does: its sends run under a deadline of three
// quarters of the lease, so that a live deliverer never posts after
// another may have taken the message over.
//
// Delivery is still at least once when a deliverer dies, or loses its
// lease, between posting and recording it: the message's claim count
// (core.OutboxMessage.Claims) then says that an earlier delivery may have
// posted it. Each post carries a key naming its message and part, where
// the poster takes one (chat.KeyedPoster), and before posting such an
// uncertain message the deliverer asks a poster that can look keys up
// (chat.DeliveryFinder, Slack) whether the post exists; Discord drops a
// post repeated with a recent key itself. Uploads carry no key.
package outbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
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
	// ClaimOutbox claims for owner, until now+lease, at most the first
	// pending message of each task on platform, due at now and not under
	// another unexpired claim; Claims counts the deliveries begun.
	ClaimOutbox(ctx context.Context, platform core.Platform, owner string, now time.Time, lease time.Duration, limit int, afterTask int64) ([]core.OutboxMessage, error)
	// ReleaseOutbox hands owner's claims of ids back, not counted when
	// untried.
	ReleaseOutbox(ctx context.Context, owner string, untried bool, ids ...int64) error
	// OutboxSent marks a message delivered and ends its claim.
	OutboxSent(ctx context.Context, id int64, platformMsgID string) error
	// OutboxRetry records a failed try (Tries + 1) and when to try again,
	// and ends the message's claim.
	OutboxRetry(ctx context.Context, id int64, next time.Time, lastErr string) error
	// OutboxFail gives up on a message and ends its claim.
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
	// Batch is how many due messages one read claims at most; default 50.
	Batch int
	// Owner names the deliverer in the claims it takes; deliverers sharing
	// a store must have different owners (a process may give its own
	// deliverers one). Default: a random id for each Deliverer.
	Owner string
	// Lease is how long a claim lasts: another deliverer takes a message
	// over once its claim is that old and unsettled (its deliverer died).
	// Sends run under a deadline of three quarters of it. Default
	// DefaultLease.
	Lease time.Duration
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
	DefaultLease       = 2 * time.Minute
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
	return d/2 + mrand.N(d/2+1)
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
	settle   chan struct{} // a delivery settled: its slot and channel are free
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
	// streams holds the live progress messages by outbox Ref; guarded
	// by mu.
	streams map[string]*stream
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
	if cfg.Owner == "" {
		cfg.Owner = "outbox-" + rand.Text()
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	return &Deliverer{
		store:      store,
		platform:   platform,
		poster:     poster,
		cfg:        cfg,
		log:        cfg.Logger.With("component", "outbox", "platform", string(platform), "owner", cfg.Owner),
		kick:       make(chan struct{}, 1),
		settle:     make(chan struct{}, 1),
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
	var after int64 // the round's claims start past this task
	for {
		r, err := d.round(ctx, &wg, d.settled, after)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("read outbox", "err", err)
		}
		// A full batch with messages handed back may have more due tasks
		// behind it, of quieter channels: the next round goes on past
		// its last task, and once a round reaches the end, from the
		// start again.
		after = 0
		if r.full && r.held > 0 {
			after = r.last
		}
		kick := d.kick
		if r.started == 0 && r.held > 0 {
			// Every due message claimed waits for a channel or a slot this
			// deliverer has busy, and a new one most likely queues behind
			// them: until a delivery settles, kicks wait for the poll, so
			// that a paced channel's backlog is not claimed and handed
			// back for every message added to it.
			kick = nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-kick:
		case <-d.settle:
		}
	}
}

// settled tells Run that a delivery settled, freeing its slot and its
// channel. It never blocks; settles made while a read is pending coalesce.
func (d *Deliverer) settled() {
	select {
	case d.settle <- struct{}{}:
	default:
	}
}

// Flush delivers the messages due now — one per task, as ClaimOutbox
// returns them — and waits until each is settled. It returns how many
// deliveries it started; a message another delivery holds (in Run, or
// another deliverer's) is left to it. A console session calls it before
// exiting; tests use it to step the deliverer.
func (d *Deliverer) Flush(ctx context.Context) (int, error) {
	var wg sync.WaitGroup
	r, err := d.round(ctx, &wg, nil, 0)
	wg.Wait()
	return r.started, err
}

// roundResult is what a round did.
type roundResult struct {
	started int   // deliveries started
	held    int   // messages handed back for want of a free slot or channel
	full    bool  // the claim returned a whole batch
	last    int64 // the task of the last message claimed
}

// round claims up to Batch due messages of the tasks past after once and
// starts a delivery for each, adding them to wg; done, when set, is called
// after each delivery settles. A claimed message that cannot start now
// (every slot is taken, its channel has perChannel deliveries under way,
// its task's previous message is still settling here, the round ends
// early) is handed back untried, due again at the next round. Claiming a
// whole batch rather than the free slots only is what lets a task of a
// quiet channel start while many tasks of a paced channel, earlier in the
// claims' order, wait.
func (d *Deliverer) round(ctx context.Context, wg *sync.WaitGroup, done func(), after int64) (r roundResult, err error) {
	if len(d.sem) == cap(d.sem) {
		return r, nil
	}
	claimedAt := time.Now() // the lease's start, on the clock deadlines use
	msgs, err := d.store.ClaimOutbox(ctx, d.platform, d.cfg.Owner, d.cfg.Now(), d.cfg.Lease, d.cfg.Batch, after)
	if err != nil {
		return r, err
	}
	if len(msgs) > 0 {
		r.full, r.last = len(msgs) == d.cfg.Batch, msgs[len(msgs)-1].TaskID
	}
	var back []int64
	defer func() {
		if len(back) > 0 {
			d.handBack(ctx, true, back...)
		}
	}()
	for i, m := range msgs {
		if ctx.Err() != nil {
			back = append(back, ids(msgs[i:])...)
			return r, nil
		}
		task, err := d.store.Task(ctx, m.TaskID)
		if err != nil {
			back = append(back, ids(msgs[i:])...)
			return r, fmt.Errorf("task %d of outbox message %d: %w", m.TaskID, m.ID, err)
		}
		if !d.claim(task) {
			back = append(back, m.ID)
			r.held++
			continue
		}
		select {
		case d.sem <- struct{}{}:
		default:
			d.release(task)
			back = append(back, m.ID)
			r.held++
			continue
		}
		r.started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.deliver(ctx, task, m, claimedAt.Add(d.cfg.Lease*3/4))
			d.release(task)
			<-d.sem
			if done != nil {
				done() // after release, so that the next read finds the task free
			}
		}()
	}
	return r, nil
}

// handBack releases claims of messages this deliverer is not delivering
// (see core.OutboxStore.ReleaseOutbox), even when ctx has ended; a failure
// is logged, and the claims then expire with their lease.
func (d *Deliverer) handBack(ctx context.Context, untried bool, ids ...int64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := d.store.ReleaseOutbox(rctx, d.cfg.Owner, untried, ids...); err != nil {
		d.log.Warn("hand back outbox claims", "ids", ids, "err", err)
	}
}

func ids(msgs []core.OutboxMessage) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
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

// deliver sends m, sending nothing after deadline (before its claim's
// lease ends), and records the outcome.
func (d *Deliverer) deliver(ctx context.Context, task core.Task, m core.OutboxMessage, deadline time.Time) {
	log := d.log.With("outbox_id", m.ID, "task_id", m.TaskID, "job_id", m.JobID, "kind", string(m.Kind))
	if m.Claims > 1 {
		log.Info("an earlier delivery may have reached the platform; looking before posting", "claims", m.Claims, "tries", m.Tries)
	}
	sendCtx, cancel := context.WithDeadline(ctx, deadline)
	platformID, err := d.send(sendCtx, task, m)
	cancel()
	if err != nil && ctx.Err() != nil {
		// Shutting down: the message is handed back as it was, its try
		// not counted, and delivered at the next start (by any
		// deliverer). It may have been posted in part, so its claim
		// counts: the next delivery looks before posting.
		log.Info("delivery interrupted by shutdown", "err", err)
		d.handBack(ctx, false, m.ID)
		return
	}
	if err != nil && sendCtx.Err() != nil {
		err = fmt.Errorf("the delivery did not end within its lease: %w", err)
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
