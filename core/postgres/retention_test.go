package postgres

import (
	"testing"
	"time"

	"github.com/baton-bot/baton/core/storetest"
)

// TestPruneAhead runs storetest.PruneAhead: a clock set back never prunes
// "the future".
func TestPruneAhead(t *testing.T) {
	s := newStore(t)
	storetest.PruneAhead(t, s, func(t *testing.T, jobID int64, at time.Time) {
		for _, q := range []string{`UPDATE jobs SET finished_at = $1 WHERE id = $2`, `UPDATE job_events SET at = $1 WHERE job_id = $2`} {
			if _, err := s.pool.Exec(t.Context(), q, ms(at), jobID); err != nil {
				t.Fatal(err)
			}
		}
	})
}
