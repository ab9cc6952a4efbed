-- baton:online
-- Indexes for retention's pruning: the rows past their age, found by time.
-- A store of a year holds millions of these rows: each index is built
-- CONCURRENTLY, outside a transaction, so that writers go on while it is
-- (see core/migration and Migrate).
CREATE INDEX CONCURRENTLY IF NOT EXISTS job_events_at ON job_events (at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS comments_created ON comments (created_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished ON jobs (finished_at) WHERE state IN ('succeeded', 'failed', 'aborted');
