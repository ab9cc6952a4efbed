package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
)

// maxStmts bounds the prepared statements kept per database handle. The
// store's queries come from a fixed set of pieces, so the bound is only a
// guard; past it, queries are parsed on every call as they would be
// without the cache.
const maxStmts = 256

// stmtCache keeps the prepared statements of one *sql.DB by their text, so
// that SQLite parses each query once per connection rather than on every
// call (parsing was a fifth of the store's time). It is safe for
// concurrent use.
type stmtCache struct {
	db *sql.DB

	mu      sync.Mutex
	stmts   map[string]*sql.Stmt // guarded by mu
	pending map[string]bool      // guarded by mu: queries to prepare once the connection is free
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}, pending: map[string]bool{}}
}

// lookup returns the cached statement of q, or nil.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[q]
}

// get returns the statement of q, preparing it when it is not cached. It
// returns nil when q cannot be prepared (the caller runs it unprepared and
// meets the error there) or the cache is full. Preparing takes a
// connection of c.db: never call get while holding the only one.
func (c *stmtCache) get(ctx context.Context, q string) *sql.Stmt {
	if st := c.lookup(q); st != nil {
		return st
	}
	c.mu.Lock()
	full := len(c.stmts) >= maxStmts
	c.mu.Unlock()
	if full {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.stmts[q]; ok { // prepared meanwhile by another caller
		st.Close()
		return old
	}
	c.stmts[q] = st
	return st
}

// later notes q to be prepared by preparePending.
func (c *stmtCache) later(q string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stmts)+len(c.pending) < maxStmts {
		c.pending[q] = true
	}
}

// preparePending prepares the queries noted by later. The writer loop
// calls it between transactions, when the writer connection is free.
func (c *stmtCache) preparePending(ctx context.Context) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	qs := make([]string, 0, len(c.pending))
	for q := range c.pending {
		qs = append(qs, q)
	}
	clear(c.pending)
	c.mu.Unlock()
	for _, q := range qs {
		c.get(ctx, q)
	}
}

// close closes the cached statements.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}

// sqlLimit is a LIMIT clause with n written out. SQLite plans a query with
// the value bound to a LIMIT parameter and prepares the statement again
// whenever another value is bound, which would undo the statement cache;
// the few limits Baton uses make a few statements instead.
func sqlLimit(n int) string { return " LIMIT " + strconv.Itoa(n) }

// readDB is the reader pool, running its queries as cached statements.
type readDB struct {
	*sql.DB
	cache *stmtCache
}

// QueryContext runs q as a cached statement.
func (r *readDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := r.cache.get(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.DB.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q as a cached statement.
func (r *readDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := r.cache.get(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.DB.QueryRowContext(ctx, q, args...)
}

// ExecContext runs q as a cached statement.
func (r *readDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := r.cache.get(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return r.DB.ExecContext(ctx, q, args...)
}

// txn is a write transaction running its queries as the writer's cached
// statements. A query met for the first time runs unprepared and is
// prepared after the transaction, when the writer's one connection is
// free again.
type txn struct {
	*sql.Tx
	cache *stmtCache
}

func (t *txn) stmt(ctx context.Context, q string) *sql.Stmt {
	if st := t.cache.lookup(q); st != nil {
		return t.Tx.StmtContext(ctx, st)
	}
	t.cache.later(q)
	return nil
}

// QueryContext runs q in the transaction.
func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q in the transaction.
func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}

// ExecContext runs q in the transaction.
func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := t.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}
