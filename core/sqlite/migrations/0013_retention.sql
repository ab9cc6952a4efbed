-- baton:online
-- Indexes for lookups that grow with the store, and for retention's pruning.
-- StatusMessage finds a job's status message by job_id (it used to read
-- every sent message); pruning finds the rows past their age by their time.
-- A store of a year holds millions of these rows: each index is built in a
-- transaction of its own and logged (see core/migration).
CREATE INDEX IF NOT EXISTS outbox_job ON outbox (job_id, id);
CREATE INDEX IF NOT EXISTS job_events_at ON job_events (at);
CREATE INDEX IF NOT EXISTS comments_created ON comments (created_at);
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_at) WHERE state IN ('succeeded', 'failed', 'aborted');
CREATE INDEX IF NOT EXISTS jobs_retry ON jobs (retry_of);
