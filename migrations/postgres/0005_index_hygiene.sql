-- Deleted messages leave the full-text index (they are never context; in the index they would
-- only take the places of live matches): the index covers live messages only, and archive
-- searches ask for `deleted_at IS NULL`.
DROP INDEX messages_fts;
CREATE INDEX messages_fts ON messages USING gin (tsv) WHERE deleted_at IS NULL;

-- Briefing results added back to context are ordinary messages, never their ack/progress posts.
DROP INDEX messages_background_results;
CREATE INDEX messages_background_results ON messages (conversation_id, id)
    WHERE role = 'assistant' AND source_type IN ('briefing', 'scheduled') AND deleted_at IS NULL
      AND kind = 'message';
