-- Usage of model requests (core.UsageStore): one row per request, with its
-- tokens, its cost by the configured prices and what it was for. No foreign
-- keys: the rows outlive their tasks and jobs, so that reports still sum.
-- at is unix milliseconds; day the request's UTC day, YYYY-MM-DD.
CREATE TABLE usage (
    id                INTEGER PRIMARY KEY,
    job_id            INTEGER NOT NULL,
    task_id           INTEGER NOT NULL,
    channel           TEXT    NOT NULL DEFAULT '',
    requester         TEXT    NOT NULL DEFAULT '',
    model             TEXT    NOT NULL DEFAULT '',
    day               TEXT    NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    cached_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost              REAL    NOT NULL DEFAULT 0,
    at                INTEGER NOT NULL
);
CREATE INDEX usage_channel_day ON usage (channel, day);
CREATE INDEX usage_requester_day ON usage (requester, day);
CREATE INDEX usage_job ON usage (job_id);
CREATE INDEX usage_task ON usage (task_id);

-- What a job waiting for a person waits for: '' for the piece's question
-- (ASK), 'budget' or 'guard' for the engine's (core.WaitBudget, WaitGuard),
-- which only `continue` answers.
ALTER TABLE jobs ADD COLUMN wait_kind TEXT NOT NULL DEFAULT '';
