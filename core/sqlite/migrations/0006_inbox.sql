-- Events a platform delivered and Baton acknowledged, kept from before the
-- acknowledgement until they are handled (core.InboxStore). due_at is when
-- the event may be claimed again: until then its handler owns it.
CREATE TABLE inbox (
    id          INTEGER PRIMARY KEY,
    platform    TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    payload     BLOB    NOT NULL,
    received_at INTEGER NOT NULL,
    tries       INTEGER NOT NULL DEFAULT 0,
    due_at      INTEGER NOT NULL,
    last_error  TEXT    NOT NULL DEFAULT '',
    UNIQUE (platform, key)
);

CREATE INDEX inbox_due ON inbox (platform, due_at);
