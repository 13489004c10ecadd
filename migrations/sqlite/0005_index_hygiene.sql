-- Deleted messages leave the full-text index (they are never context; in the index they would
-- only take the places of live matches).
DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages WHERE deleted_at IS NOT NULL);

CREATE TRIGGER messages_fts_deleted AFTER UPDATE OF deleted_at ON messages
WHEN new.deleted_at IS NOT NULL AND old.deleted_at IS NULL BEGIN
    DELETE FROM messages_fts WHERE rowid = new.id;
END;

-- Briefing results added back to context are ordinary messages, never their ack/progress posts.
DROP INDEX messages_background_results;
CREATE INDEX messages_background_results ON messages (conversation_id, id)
    WHERE role = 'assistant' AND source_type IN ('briefing', 'scheduled') AND deleted_at IS NULL
      AND kind = 'message';
