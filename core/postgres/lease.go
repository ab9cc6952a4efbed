package postgres

import (
	"context"
	"fmt"
	"time"
)

// serverMS is the server's clock in unix milliseconds: leases end by it,
// never by a host's clock (see core.LeaseStore).
const serverMS = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// AcquireLease takes or renews the lease name for owner (see
// core.LeaseStore), by the server's clock. A free name is inserted; a
// held one is taken over only when its row, read under its lock, is
// owner's or past its end, so of owners racing for it one wins.
func (s *Store) AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	if err := checkLease(name, owner, ttl); err != nil {
		return false, err
	}
	var n int64
	err := s.tx(ctx, func(tx db) error {
		var err error
		n, err = tx.exec(ctx, `INSERT INTO leases AS l (name, owner, expires_at) VALUES ($1, $2, `+serverMS+` + $3::bigint)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
			WHERE l.owner = excluded.owner OR l.expires_at <= `+serverMS, name, owner, ttl.Milliseconds())
		return err
	})
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return n == 1, nil
}

// ReleaseLease ends owner's hold of name (see core.LeaseStore).
func (s *Store) ReleaseLease(ctx context.Context, name, owner string) error {
	err := s.tx(ctx, func(tx db) error {
		_, err := tx.exec(ctx, `DELETE FROM leases WHERE name = $1 AND owner = $2`, name, owner)
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
