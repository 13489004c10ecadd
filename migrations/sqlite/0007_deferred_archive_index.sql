-- The archive index is filled in bulk when recall needs it, not inside every intake
-- transaction: recall reaches beyond the lookback, so the newest messages need no index yet,
-- and intake stays fast. `last_id` is the newest message id the index has caught up with.
CREATE TABLE archive_index_state (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    last_id INTEGER NOT NULL
);
INSERT INTO archive_index_state (id, last_id) SELECT 1, COALESCE(MAX(id), 0) FROM messages;

DROP TRIGGER messages_fts_insert;

-- An edit re-indexes only what the index already holds; later rows are indexed as they are.
DROP TRIGGER messages_fts_update;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages
WHEN old.id <= (SELECT last_id FROM archive_index_state) AND new.deleted_at IS NULL BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
    INSERT INTO messages_fts (rowid, conv, text) VALUES (new.id, 'c' || new.conversation_id, new.text);
END;
