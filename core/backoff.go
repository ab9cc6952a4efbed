package core

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits for d, or until ctx ends: then it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RetryBackoff is the default delay before retrying a job that failed for
// the n-th time (n ≥ 1): a random duration in [0, min(10 min, 15 s·2^(n-1))),
// "full jitter", so that jobs failing together do not retry together.
func RetryBackoff(n int) time.Duration {
	const base, ceiling = 15 * time.Second, 10 * time.Minute
	if n < 1 {
		n = 1
	}
	limit := ceiling
	if n <= 6 { // 15 s · 2^6 > 10 min
		limit = min(ceiling, base<<(n-1))
	}
	return rand.N(limit)
}
