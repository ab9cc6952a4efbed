-- Outbox claims (core.OutboxStore.ClaimOutbox): several deliverers of one
-- platform, on any host, share the store. A message being delivered is
-- claimed by its deliverer (claimed_by) until claimed_until (unix ms; 0:
-- unclaimed), and no other deliverer takes it meanwhile. claims counts the
-- deliveries begun: more than one means an earlier one may have reached
-- the platform.
ALTER TABLE outbox ADD COLUMN claimed_by    TEXT    NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN claimed_until BIGINT  NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN claims        INTEGER NOT NULL DEFAULT 0;
