-- Approvals (core.ApprovalStore): a job may wait for a person's decision on
-- a tool call. The jobs table is rebuilt for its state check to admit
-- waiting_approval (SQLite cannot alter a CHECK); its rows, ids and indexes
-- stay as they were. Foreign keys are checked at commit.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE jobs_new (
    id                 INTEGER PRIMARY KEY,
    task_id            INTEGER NOT NULL REFERENCES tasks (id),
    parent_job_id      INTEGER REFERENCES jobs (id),
    retry_of           INTEGER REFERENCES jobs (id),
    piece              TEXT    NOT NULL DEFAULT '',
    instruction        TEXT    NOT NULL DEFAULT '',
    state              TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'waiting_human',
                                   'waiting_subtasks', 'waiting_approval', 'succeeded', 'failed', 'aborted')),
    movement           TEXT    NOT NULL DEFAULT '',
    resume_movement    TEXT    NOT NULL DEFAULT '',
    movement_count     INTEGER NOT NULL DEFAULT 0,
    iteration          INTEGER NOT NULL DEFAULT 0,
    attempt            INTEGER NOT NULL DEFAULT 0,
    failures           INTEGER NOT NULL DEFAULT 0,
    question           TEXT    NOT NULL DEFAULT '',
    wait_seq           INTEGER NOT NULL DEFAULT 0,
    lessons            TEXT    NOT NULL DEFAULT '',
    result_summary     TEXT    NOT NULL DEFAULT '',
    error              TEXT    NOT NULL DEFAULT '',
    abort_requested_at INTEGER NOT NULL DEFAULT 0,
    aborted_by         TEXT    NOT NULL DEFAULT '',
    prompt_tokens      INTEGER NOT NULL DEFAULT 0,
    completion_tokens  INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL,
    started_at         INTEGER NOT NULL DEFAULT 0,
    finished_at        INTEGER NOT NULL DEFAULT 0,
    trigger_msg_id     TEXT    NOT NULL DEFAULT '',
    queued_at          INTEGER NOT NULL DEFAULT 0
);

INSERT INTO jobs_new (id, task_id, parent_job_id, retry_of, piece, instruction, state, movement,
    resume_movement, movement_count, iteration, attempt, failures, question, wait_seq, lessons,
    result_summary, error, abort_requested_at, aborted_by, prompt_tokens, completion_tokens,
    created_at, started_at, finished_at, trigger_msg_id, queued_at)
SELECT id, task_id, parent_job_id, retry_of, piece, instruction, state, movement,
    resume_movement, movement_count, iteration, attempt, failures, question, wait_seq, lessons,
    result_summary, error, abort_requested_at, aborted_by, prompt_tokens, completion_tokens,
    created_at, started_at, finished_at, trigger_msg_id, queued_at
FROM jobs;

DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;

CREATE INDEX jobs_task ON jobs (task_id, id);
CREATE INDEX jobs_parent ON jobs (parent_job_id);
CREATE INDEX jobs_state ON jobs (state);

-- One approval per wait of a job: the pending tool call and its decision.
CREATE TABLE approvals (
    id         INTEGER PRIMARY KEY,
    job_id     INTEGER NOT NULL REFERENCES jobs (id),
    task_id    INTEGER NOT NULL REFERENCES tasks (id),
    wait_seq   INTEGER NOT NULL,
    tool       TEXT    NOT NULL,
    arguments  TEXT    NOT NULL DEFAULT '',
    call_id    TEXT    NOT NULL DEFAULT '',
    subject    TEXT    NOT NULL DEFAULT '',
    preview    TEXT    NOT NULL DEFAULT '',
    channel    TEXT    NOT NULL DEFAULT '',
    requester  TEXT    NOT NULL DEFAULT '',
    rule       TEXT    NOT NULL DEFAULT '',
    state      TEXT    NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
    decided_by TEXT    NOT NULL DEFAULT '',
    reason     TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    deadline   INTEGER NOT NULL,
    decided_at INTEGER NOT NULL DEFAULT 0,
    UNIQUE (job_id, wait_seq)
);

CREATE INDEX approvals_pending ON approvals (state, deadline);
CREATE INDEX approvals_task ON approvals (task_id, id);

-- "Always allow" rules people stored from approvals, per channel.
CREATE TABLE allow_rules (
    id         INTEGER PRIMARY KEY,
    channel    TEXT    NOT NULL,
    tool       TEXT    NOT NULL,
    pattern    TEXT    NOT NULL,
    created_by TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE INDEX allow_rules_channel ON allow_rules (channel, id);

-- What a movement parked for an approval resumes from; taken (deleted) by
-- the attempt that resumes it.
CREATE TABLE job_checkpoints (
    job_id   INTEGER PRIMARY KEY REFERENCES jobs (id),
    wait_seq INTEGER NOT NULL,
    data     BLOB    NOT NULL
);

-- An update with a ref edits the message first posted under that ref
-- (an approval's message); without one, the job's status message.
ALTER TABLE outbox ADD COLUMN ref TEXT NOT NULL DEFAULT '';
CREATE INDEX outbox_ref ON outbox (task_id, ref) WHERE ref <> '';
