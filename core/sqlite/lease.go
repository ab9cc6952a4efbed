package sqlite

import (
	"context"
	"fmt"
	"time"
)

// AcquireLease takes or renews the lease name for owner (see
// core.LeaseStore), by this host's clock, read in the write itself: the
// writes of every process sharing the file are serialized, so of owners
// racing for a name one wins.
func (s *Store) AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	if err := checkLease(name, owner, ttl); err != nil {
		return false, err
	}
	var n int64
	err := s.tx(ctx, func(tx *txn) error {
		now := time.Now().UnixMilli()
		res, err := tx.ExecContext(ctx, `INSERT INTO leases (name, owner, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
			WHERE leases.owner = excluded.owner OR leases.expires_at <= ?`, name, owner, now+ttl.Milliseconds(), now)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return n == 1, nil
}

// ReleaseLease ends owner's hold of name (see core.LeaseStore).
func (s *Store) ReleaseLease(ctx context.Context, name, owner string) error {
	err := s.tx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND owner = ?`, name, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// checkLease refuses what core.LeaseStore does not admit.
func checkLease(name, owner string, ttl time.Duration) error {
	switch {
	case name == "" || owner == "":
		return fmt.Errorf("acquire lease %q for %q: a lease needs a name and an owner", name, owner)
	case ttl < time.Millisecond:
		return fmt.Errorf("acquire lease %s: ttl %s is under a millisecond", name, ttl)
	}
	return nil
}
