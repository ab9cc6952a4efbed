-- Named leases (core.LeaseStore): a name held by one owner until
-- expires_at, unix milliseconds of the store's clock. Who holds what now,
-- not data: a store copy leaves it behind.
CREATE TABLE leases (
    name       TEXT    PRIMARY KEY,
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);
