-- Baton's schema, version 1.
--
-- Portable on purpose so that a PostgreSQL store can mirror it: timestamps
-- are INTEGER unix milliseconds in UTC (0 = none), text is TEXT, optional
-- references are NULL rather than 0, and ids are INTEGER PRIMARY KEY (a
-- PostgreSQL port uses BIGINT GENERATED ALWAYS AS IDENTITY).

CREATE TABLE tasks (
    id             INTEGER PRIMARY KEY,
    parent_task_id INTEGER REFERENCES tasks (id),
    platform       TEXT    NOT NULL,
    team           TEXT    NOT NULL DEFAULT '',
    channel        TEXT    NOT NULL DEFAULT '',
    thread         TEXT    NOT NULL DEFAULT '',
    owner_user     TEXT    NOT NULL DEFAULT '',
    title          TEXT    NOT NULL DEFAULT '',
    workspace      TEXT    NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    UNIQUE (platform, team, channel, thread)
);

CREATE INDEX tasks_parent ON tasks (parent_task_id);

-- platform_msg_id is NULL when the comment has none: NULLs are distinct in
-- a UNIQUE constraint (SQLite and PostgreSQL alike), so only real platform
-- message ids are deduplicated.
CREATE TABLE comments (
    id              INTEGER PRIMARY KEY,
    task_id         INTEGER NOT NULL REFERENCES tasks (id),
    platform_msg_id TEXT,
    author_id       TEXT    NOT NULL DEFAULT '',
    author_name     TEXT    NOT NULL DEFAULT '',
    role            TEXT    NOT NULL CHECK (role IN ('user', 'bot')),
    text            TEXT    NOT NULL DEFAULT '',
    files           TEXT    NOT NULL DEFAULT '[]',
    created_at      INTEGER NOT NULL,
    UNIQUE (task_id, platform_msg_id)
);

CREATE INDEX comments_task ON comments (task_id, id);

CREATE TABLE jobs (
    id                 INTEGER PRIMARY KEY,
    task_id            INTEGER NOT NULL REFERENCES tasks (id),
    parent_job_id      INTEGER REFERENCES jobs (id),
    retry_of           INTEGER REFERENCES jobs (id),
    piece              TEXT    NOT NULL DEFAULT '',
    instruction        TEXT    NOT NULL DEFAULT '',
    state              TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'waiting_human',
                                   'waiting_subtasks', 'succeeded', 'failed', 'aborted')),
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
    finished_at        INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX jobs_task ON jobs (task_id, id);
CREATE INDEX jobs_parent ON jobs (parent_job_id);
CREATE INDEX jobs_state ON jobs (state);

CREATE TABLE job_events (
    id       INTEGER PRIMARY KEY,
    job_id   INTEGER NOT NULL REFERENCES jobs (id),
    at       INTEGER NOT NULL,
    kind     TEXT    NOT NULL,
    movement TEXT    NOT NULL DEFAULT '',
    detail   TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX job_events_job ON job_events (job_id, id);

CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY,
    task_id         INTEGER NOT NULL REFERENCES tasks (id),
    job_id          INTEGER REFERENCES jobs (id),
    attempt         INTEGER NOT NULL DEFAULT 0,
    seq             INTEGER NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN ('post', 'update', 'react', 'unreact', 'upload')),
    payload         TEXT    NOT NULL DEFAULT '',
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'sent', 'failed')),
    tries           INTEGER NOT NULL DEFAULT 0,
    next_try_at     INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NOT NULL DEFAULT '',
    platform_msg_id TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    UNIQUE (task_id, seq)
);

CREATE INDEX outbox_pending ON outbox (state, task_id, seq);

CREATE TABLE inbound_events (
    key     TEXT    PRIMARY KEY,
    seen_at INTEGER NOT NULL
);

CREATE INDEX inbound_events_seen ON inbound_events (seen_at);
