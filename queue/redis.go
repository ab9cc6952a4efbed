package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/core"
)

var _ core.Queue = (*Redis)(nil)

// Redis is core.Queue on Redis (see the package doc for the layout). It is
// safe for concurrent use by any number of goroutines and processes sharing
// the same Redis, prefix and name.
type Redis struct {
	client redis.UniversalClient
	opts   Options
	log    *slog.Logger

	// Keys.
	pending, active, retry, dead, parked, signal, aborts, jobPrefix string

	leaseMS int64
	ttlSec  int64

	closed atomic.Bool
	// life ends at Close.
	life context.Context
	kill context.CancelFunc

	// wakePrefix starts the private wake-up lists of this value's blocked
	// Claims: a Claim blocks on the doorbell and on a list of its own, so
	// that its context ending or Close wakes exactly it, whichever process
	// would take a token rung on the shared doorbell. go-redis does not
	// interrupt a blocking read when a context is cancelled.
	wakePrefix string
	wakeSeq    atomic.Uint64
	mu         sync.Mutex
	waiting    map[string]struct{} // guarded by mu; wake lists of blocked Claims
	maxBlock   time.Duration       // longest single block on the doorbell
}

// Claim blocks on the doorbell in chunks of at most maxBlock, as a bound
// should a wake-up be lost (Redis restarting as the context ends).
const maxBlock = 2 * time.Second

// wakeTTL bounds the life of a wake-up list whose Claim had already
// returned when the wake-up came.
const wakeTTL = 10 * time.Second

// reapBatch bounds the leases one reap script looks at.
const reapBatch = 100

// reconcileBatch bounds the items one reconcile script handles, so that a
// long reconcile never blocks Redis for long.
const reconcileBatch = 500

// NewRedis returns a queue on client. The caller owns client: Close does
// not close it. NewRedis checks nothing over the network; call Ping for that.
func NewRedis(client redis.UniversalClient, opts Options) (*Redis, error) {
	if client == nil {
		return nil, errors.New("queue: nil redis client")
	}
	opts = opts.withDefaults()
	if opts.Lease < time.Millisecond {
		return nil, fmt.Errorf("queue: lease %v is shorter than a millisecond", opts.Lease)
	}
	base := fmt.Sprintf("%s:{%s}:", opts.Prefix, opts.Name)
	life, kill := context.WithCancel(context.Background())
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	return &Redis{
		client:    client,
		opts:      opts,
		log:       opts.Logger.With("queue", opts.Name),
		pending:   base + "pending",
		active:    base + "active",
		retry:     base + "retry",
		dead:      base + "dead",
		parked:    base + "parked",
		signal:    base + "signal",
		aborts:    base + "aborts",
		jobPrefix: base + "job:",
		leaseMS:   opts.Lease.Milliseconds(),
		ttlSec:    int64(finishedTTL / time.Second),
		life:      life,
		kill:      kill,

		wakePrefix: base + "wake:" + hex.EncodeToString(id[:]) + ":",
		waiting:    make(map[string]struct{}),
		maxBlock:   maxBlock,
	}, nil
}

func (r *Redis) jobKey(id int64) string {
	return r.jobPrefix + strconv.FormatInt(id, 10)
}

func (r *Redis) check() error {
	if r.closed.Load() {
		return core.ErrClosed
	}
	return nil
}

// Enqueue implements core.Queue.
func (r *Redis) Enqueue(ctx context.Context, jobID int64) error {
	if err := r.check(); err != nil {
		return err
	}
	err := enqueueScript.Run(ctx, r.client, []string{r.jobKey(jobID), r.pending, r.signal}, jobID).Err()
	if err != nil {
		return fmt.Errorf("enqueue job %d: %w", jobID, translate(err))
	}
	return nil
}

// Claim implements core.Queue; a wait of zero or less looks once. While no
// job is ready it blocks on the doorbell, holding one connection of the
// client's pool.
func (r *Redis) Claim(ctx context.Context, wait time.Duration) (core.Lease, error) {
	ls, err := r.ClaimBatch(ctx, 1, wait)
	if err != nil {
		return core.Lease{}, err
	}
	return ls[0], nil
}

// maxBatch bounds one claim or ack script, so that no single script holds
// the server for long.
const maxBatch = 256

// ClaimBatch takes up to n ready jobs in one round trip, waiting up to wait
// for the first; it returns core.ErrNoJob when none came. ctx ending
// interrupts the wait at once (ctx's error) but never a claim on the wire:
// jobs the script took are returned, not left leased to nobody.
func (r *Redis) ClaimBatch(ctx context.Context, n int, wait time.Duration) ([]core.Lease, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n = min(max(n, 1), maxBatch)
	end := time.Now().Add(wait)
	for {
		ls, next, err := r.claimOnce(context.WithoutCancel(ctx), n)
		if err != nil || len(ls) > 0 {
			return ls, err
		}
		left := time.Until(end)
		if left <= 0 {
			return nil, core.ErrNoJob
		}
		block := min(left, r.maxBlock)
		if next >= 0 {
			// A retry becomes due: wake up for it (at least 1ms later, so
			// that the server's clock has passed its due time).
			block = min(block, next+time.Millisecond)
		}
		if err := r.await(ctx, block); err != nil {
			return nil, err
		}
	}
}

// claimOnce runs the claim script for up to n jobs. Without a job it
// returns the time until the next retry is due, or -1.
func (r *Redis) claimOnce(ctx context.Context, n int) ([]core.Lease, time.Duration, error) {
	v, err := claimScript.Run(ctx, r.client, []string{r.pending, r.active, r.retry},
		r.jobPrefix, r.leaseMS, r.ttlSec, n).Int64Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("claim: %w", translate(err))
	}
	if len(v) == 2 && v[0] == 0 {
		if v[1] < 0 {
			return nil, -1, nil
		}
		return nil, time.Duration(v[1]) * time.Millisecond, nil
	}
	if len(v) < 2 || v[0] < 1 || int64(len(v)) != 2+3*v[0] {
		return nil, 0, fmt.Errorf("claim: unexpected reply %v", v)
	}
	deadline := time.UnixMilli(v[1])
	ls := make([]core.Lease, 0, v[0])
	for i := 2; i < len(v); i += 3 {
		ls = append(ls, core.Lease{JobID: v[i], Attempt: v[i+1], Failures: int(v[i+2]), Deadline: deadline})
	}
	return ls, 0, nil
}

// await waits up to d for a doorbell token. Returning without a token (the
// wait ended) is not an error: the caller tries to claim again. ctx ending
// or Close wakes it through its own wake list (see Redis.wakePrefix).
func (r *Redis) await(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := r.wakePrefix + strconv.FormatUint(r.wakeSeq.Add(1), 10)
	r.mu.Lock()
	if r.life.Err() != nil {
		r.mu.Unlock()
		return core.ErrClosed
	}
	r.waiting[key] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.waiting, key)
	}()
	stop := context.AfterFunc(ctx, func() { r.wake(key) })
	defer stop()

	// The read deadline must outlast the block time: the command is sent
	// without ctx's cancellation (which go-redis would not honour mid-read
	// anyway), and its context carries no deadline shorter than the block.
	bctx := context.WithoutCancel(ctx)
	var v []string
	var err error
	if d >= time.Second {
		// The typed command extends the read deadline past the block time;
		// it takes whole seconds.
		v, err = r.client.BLPop(bctx, d.Truncate(time.Second), r.signal, key).Result()
	} else {
		secs := strconv.FormatFloat(max(d.Seconds(), 0.001), 'f', 3, 64)
		v, err = r.client.Do(bctx, "BLPOP", r.signal, key, secs).StringSlice()
	}
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("claim: wait for a job: %w", translate(err))
	}
	// A doorbell token, rather than a wake-up or the end of the block.
	rung := len(v) == 2 && v[0] == r.signal
	if r.life.Err() != nil || ctx.Err() != nil {
		if rung {
			// The token was meant for a claimer that will claim: pass it on.
			r.pass()
		}
		if r.life.Err() != nil {
			return core.ErrClosed
		}
		return ctx.Err()
	}
	return nil
}

// wake pushes a token on each of keys, the wake lists of blocked Claims,
// in one round trip; each list expires soon after, in case its Claim had
// already returned.
func (r *Redis) wake(keys ...string) {
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.LPush(ctx, k, "1")
			p.PExpire(ctx, k, wakeTTL)
		}
		return nil
	})
	if err != nil {
		r.log.Debug("queue: wake blocked claims", "claims", len(keys), "err", err)
	}
}

// pass puts back a doorbell token this process took but will not use.
func (r *Redis) pass() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.client.LPush(ctx, r.signal, "1").Err(); err != nil {
		r.log.Warn("queue: pass on a wake-up", "err", err)
	}
}

// Heartbeat implements core.Queue, renewing all leases in one round trip.
func (r *Redis) Heartbeat(ctx context.Context, leases []core.Lease) ([]core.LeaseStatus, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if len(leases) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 2+2*len(leases))
	args = append(args, r.jobPrefix, r.leaseMS)
	for _, l := range leases {
		args = append(args, l.JobID, l.Attempt)
	}
	v, err := heartbeatScript.Run(ctx, r.client, []string{r.active}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("heartbeat %d leases: %w", len(leases), translate(err))
	}
	if len(v) != len(leases) {
		return nil, fmt.Errorf("heartbeat: %d answers for %d leases", len(v), len(leases))
	}
	out := make([]core.LeaseStatus, len(v))
	for i, s := range v {
		switch s {
		case 1:
			out[i] = core.LeaseOK
		case 2:
			out[i] = core.LeaseAbort
		default:
			out[i] = core.LeaseLost
		}
	}
	return out, nil
}

// Ack implements core.Queue. It also settles a job whose lease expired if
// no newer attempt claimed it yet.
func (r *Redis) Ack(ctx context.Context, l core.Lease) error {
	if err := r.check(); err != nil {
		return err
	}
	err := ackScript.Run(ctx, r.client, []string{r.jobKey(l.JobID), r.active, r.retry},
		l.JobID, l.Attempt, r.ttlSec).Err()
	if err != nil {
		return fmt.Errorf("ack job %d attempt %d: %w", l.JobID, l.Attempt, translate(err))
	}
	return nil
}

// AckBatch acks every lease in as few round trips as it can; stale ones
// change nothing.
func (r *Redis) AckBatch(ctx context.Context, leases []core.Lease) error {
	if err := r.check(); err != nil {
		return err
	}
	for len(leases) > 0 {
		chunk := leases[:min(len(leases), maxBatch)]
		leases = leases[len(chunk):]
		args := make([]any, 0, 2+2*len(chunk))
		args = append(args, r.jobPrefix, r.ttlSec)
		for _, l := range chunk {
			args = append(args, l.JobID, l.Attempt)
		}
		if err := ackBatchScript.Run(ctx, r.client, []string{r.active, r.retry}, args...).Err(); err != nil {
			return fmt.Errorf("ack %d jobs: %w", len(chunk), translate(err))
		}
	}
	return nil
}

// Nack implements core.Queue. A delay of zero or less makes the job ready
// at once (at the tail of pending).
func (r *Redis) Nack(ctx context.Context, l core.Lease, delay time.Duration) error {
	if err := r.check(); err != nil {
		return err
	}
	err := nackScript.Run(ctx, r.client, []string{r.jobKey(l.JobID), r.active, r.retry, r.pending, r.signal},
		l.JobID, l.Attempt, delay.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("nack job %d attempt %d: %w", l.JobID, l.Attempt, translate(err))
	}
	return nil
}

// Requeue implements core.Queue.
func (r *Redis) Requeue(ctx context.Context, l core.Lease) error {
	if err := r.check(); err != nil {
		return err
	}
	err := requeueScript.Run(ctx, r.client, []string{r.jobKey(l.JobID), r.active, r.pending, r.signal},
		l.JobID, l.Attempt).Err()
	if err != nil {
		return fmt.Errorf("requeue job %d attempt %d: %w", l.JobID, l.Attempt, translate(err))
	}
	return nil
}

// Park implements core.Queue. Like Ack, it also settles a job whose lease
// expired if no newer attempt claimed it yet.
func (r *Redis) Park(ctx context.Context, l core.Lease, waitSeq int64) error {
	if err := r.check(); err != nil {
		return err
	}
	err := parkScript.Run(ctx, r.client, []string{r.jobKey(l.JobID), r.active, r.retry, r.parked, r.pending, r.signal},
		l.JobID, l.Attempt, waitSeq).Err()
	if err != nil {
		return fmt.Errorf("park job %d attempt %d: %w", l.JobID, l.Attempt, translate(err))
	}
	return nil
}

// Resume implements core.Queue.
func (r *Redis) Resume(ctx context.Context, jobID, waitSeq int64) (bool, error) {
	if err := r.check(); err != nil {
		return false, err
	}
	n, err := resumeScript.Run(ctx, r.client, []string{r.jobKey(jobID), r.parked, r.pending, r.signal},
		jobID, waitSeq).Int64()
	if err != nil {
		return false, fmt.Errorf("resume job %d wait %d: %w", jobID, waitSeq, translate(err))
	}
	return n == 1 || n == 2, nil
}

// Abort implements core.Queue. A job the queue does not know is remembered
// as aborted, so that a later Enqueue of it does nothing.
func (r *Redis) Abort(ctx context.Context, jobID int64) error {
	if err := r.check(); err != nil {
		return err
	}
	err := abortScript.Run(ctx, r.client, []string{r.jobKey(jobID), r.pending, r.retry, r.parked},
		jobID, r.ttlSec, r.aborts).Err()
	if err != nil {
		return fmt.Errorf("abort job %d: %w", jobID, translate(err))
	}
	return nil
}

// AbortRequested implements core.Queue, in one round trip.
func (r *Redis) AbortRequested(ctx context.Context, ids []int64) ([]int64, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, r.jobKey(id), "abort")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read abort flags of %d jobs: %w", len(ids), translate(err))
	}
	var out []int64
	for i, c := range cmds {
		if c.Val() == "1" {
			out = append(out, ids[i])
		}
	}
	return out, nil
}

// WatchAborts implements core.Queue. It subscribes to the aborts channel
// and calls fn for each message, on the goroutine that called WatchAborts. When the
// subscription's connection drops it returns the error: the caller
// subscribes again (and polls AbortRequested for what it missed).
func (r *Redis) WatchAborts(ctx context.Context, fn func(jobID int64)) error {
	if err := r.check(); err != nil {
		return err
	}
	ps := r.client.Subscribe(ctx, r.aborts)
	defer ps.Close()
	// ReceiveMessage does not watch ctx: closing the subscription unblocks it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	stopLife := context.AfterFunc(r.life, func() { _ = ps.Close() })
	defer stopLife()
	if _, err := ps.Receive(ctx); err != nil {
		return r.watchErr(ctx, err)
	}
	for {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			return r.watchErr(ctx, err)
		}
		id, err := strconv.ParseInt(msg.Payload, 10, 64)
		if err != nil {
			r.log.Warn("queue: ignoring a malformed abort message", "payload", msg.Payload)
			continue
		}
		fn(id)
	}
}

func (r *Redis) watchErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if r.life.Err() != nil {
		return core.ErrClosed
	}
	return fmt.Errorf("watch aborts: %w", translate(err))
}

// Reap implements core.Queue. maxFailures < 1 means no limit: expired jobs
// always go to retry. Each job's retry delay is Options.Backoff of its
// failures counted so far, this one included.
//
// Backoff runs in Go, so a reap takes two scripts per batch: the first
// lists the expired leases, the second moves those still expired under the
// same attempt (a heartbeat or another reaper may have come between).
// Reapers in several processes may run at once: each lease moves once.
func (r *Redis) Reap(ctx context.Context, maxFailures int) ([]core.Lease, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	var dead []core.Lease
	for {
		v, err := expiredScript.Run(ctx, r.client, []string{r.active, r.dead},
			r.jobPrefix, reapBatch, r.ttlSec).Int64Slice()
		if err != nil {
			return dead, fmt.Errorf("reap: list expired leases: %w", translate(err))
		}
		if len(v) == 0 {
			return dead, nil
		}
		args := make([]any, 0, 3+3*len(v)/4)
		args = append(args, r.jobPrefix, max(maxFailures, 0), r.ttlSec)
		for i := 0; i+3 < len(v); i += 4 {
			delay := r.opts.Backoff(int(v[i+2]) + 1)
			args = append(args, v[i], v[i+1], max(delay.Milliseconds(), 0))
		}
		d, err := reapScript.Run(ctx, r.client, []string{r.active, r.retry, r.dead, r.signal}, args...).Int64Slice()
		if err != nil {
			return dead, fmt.Errorf("reap: %w", translate(err))
		}
		for i := 0; i+3 < len(d); i += 4 {
			l := core.Lease{JobID: d[i], Attempt: d[i+1], Failures: int(d[i+2]), Deadline: time.UnixMilli(d[i+3])}
			r.log.Warn("queue: job dead after repeated lease expiry", "job", l.JobID, "attempt", l.Attempt, "failures", l.Failures)
			dead = append(dead, l)
		}
		if len(v)/4 < reapBatch {
			return dead, nil
		}
	}
}

// Reconcile implements core.Queue. Items in states other than queued and
// running are ignored.
func (r *Redis) Reconcile(ctx context.Context, items []core.ReconcileItem) (int, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	keys := []string{r.pending, r.active, r.retry, r.dead, r.parked, r.signal}
	total := 0
	args := []any{r.jobPrefix}
	flush := func() error {
		if len(args) == 1 {
			return nil
		}
		n, err := reconcileScript.Run(ctx, r.client, keys, args...).Int()
		if err != nil {
			return fmt.Errorf("reconcile: %w", translate(err))
		}
		total += n
		args = args[:1]
		return nil
	}
	for _, it := range items {
		if it.State != core.JobQueued && it.State != core.JobRunning {
			continue
		}
		args = append(args, it.JobID, it.Attempt)
		if len(args) > 2*reconcileBatch {
			if err := flush(); err != nil {
				return total, err
			}
		}
	}
	if err := flush(); err != nil {
		return total, err
	}
	if total > 0 {
		r.log.Info("queue: reconciled jobs", "restored", total)
	}
	return total, nil
}

// Position returns job jobID's place among the ready jobs (1: claimed
// next), or 0 when it is not waiting to be claimed. It scans the pending
// list: meant for a person's !status, not for hot paths.
func (r *Redis) Position(ctx context.Context, jobID int64) (int, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	n, err := positionScript.Run(ctx, r.client, []string{r.pending}, jobID).Int()
	if err != nil {
		return 0, fmt.Errorf("position of job %d: %w", jobID, translate(err))
	}
	return n, nil
}

// Stats implements core.Queue, in one round trip.
func (r *Redis) Stats(ctx context.Context) (core.QueueStats, error) {
	if err := r.check(); err != nil {
		return core.QueueStats{}, err
	}
	var pending, active, retry, dead, parked *redis.IntCmd
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		pending = p.LLen(ctx, r.pending)
		active = p.ZCard(ctx, r.active)
		retry = p.ZCard(ctx, r.retry)
		dead = p.ZCard(ctx, r.dead)
		parked = p.SCard(ctx, r.parked)
		return nil
	})
	if err != nil {
		return core.QueueStats{}, fmt.Errorf("queue stats: %w", translate(err))
	}
	return core.QueueStats{
		Pending: pending.Val(),
		Active:  active.Val(),
		Retry:   retry.Val(),
		Dead:    dead.Val(),
		Parked:  parked.Val(),
	}, nil
}

// Ping implements core.Queue.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", translate(err))
	}
	return nil
}

// Close stops the queue: Claims waiting for a job return core.ErrClosed
// at once, WatchAborts returns, and later calls fail with core.ErrClosed.
// It does not close the Redis client, which the caller owns.
func (r *Redis) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	r.mu.Lock()
	r.kill() // under mu: no Claim starts blocking after the keys are read
	keys := make([]string, 0, len(r.waiting))
	for k := range r.waiting {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	r.wake(keys...)
	return nil
}

// translate turns go-redis sentinels into core's, so that callers need not
// know the driver.
func translate(err error) error {
	switch {
	case errors.Is(err, redis.ErrClosed):
		return core.ErrClosed
	case errors.Is(err, redis.Nil):
		return core.ErrNotFound
	}
	return err
}
