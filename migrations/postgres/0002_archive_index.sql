-- Full-text index of message texts for archive recall (context beyond the lookback).
-- Mirrors migrations/sqlite/0002_archive_index.sql: where SQLite keeps a contentless FTS5 table
-- filled by triggers, PostgreSQL keeps the document next to the text (a stored generated
-- column, always in step with edits) and a GIN index over it. English stemming, like FTS5's
-- porter tokenizer; a query names its conversation with an ordinary predicate.
ALTER TABLE messages
    ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED;

CREATE INDEX messages_fts ON messages USING gin (tsv);
