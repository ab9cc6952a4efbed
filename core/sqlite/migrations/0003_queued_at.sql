-- When a job last became queued (created, resumed or requeued), for the
-- time it waits for a worker; 0 when unknown.
ALTER TABLE jobs ADD COLUMN queued_at INTEGER NOT NULL DEFAULT 0;
