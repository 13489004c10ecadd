-- Reads of a conversation's history go by arrival order (id), newest first.
CREATE INDEX messages_by_conversation_order ON messages (conversation_id, id);

-- The newest delivered briefing/scheduled results of a conversation, without scanning its
-- whole history when there are none.
CREATE INDEX messages_background_results ON messages (conversation_id, id)
    WHERE role = 'assistant' AND source_type IN ('briefing', 'scheduled') AND deleted_at IS NULL;
