-- Indexes for retention's pruning: the rows past their age, found by time.
CREATE INDEX IF NOT EXISTS job_events_at ON job_events (at);
CREATE INDEX IF NOT EXISTS comments_created ON comments (created_at);
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_at) WHERE state IN ('succeeded', 'failed', 'aborted');
