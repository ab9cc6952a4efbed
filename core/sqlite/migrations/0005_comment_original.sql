-- A comment's text as the platform sent it (its markup: <@U123>, &amp;),
-- kept for audit when it differs from the text the model reads; '' when
-- it does not.
ALTER TABLE comments ADD COLUMN original TEXT NOT NULL DEFAULT '';
