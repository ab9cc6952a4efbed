-- Facts about the store itself, one row each. store_id is a random id made
-- when the store is created (or first migrated to this version) and never
-- changed: a copy of the file (a restored backup) keeps it, a new store
-- gets another. The workspaces directory records the id of the store its
-- workspaces belong to, so that a new store does not take over the
-- workspaces of a lost one (see workspace.Claim).
CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

INSERT INTO store_meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))));
