-- The platform id of the message that started a job: progress reactions
-- (claimed, done, failed) go on it.
ALTER TABLE jobs ADD COLUMN trigger_msg_id TEXT NOT NULL DEFAULT '';
