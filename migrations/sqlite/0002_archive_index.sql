-- Full-text index of message texts for archive recall (context beyond the lookback).
-- Contentless: the text lives in `messages`; `conv` ('c' || conversation id) lets a query
-- intersect with one conversation inside the index instead of filtering afterwards.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    conv,
    text,
    content = '',
    contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

INSERT INTO messages_fts (rowid, conv, text)
SELECT id, 'c' || conversation_id, text FROM messages;

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, conv, text) VALUES (new.id, 'c' || new.conversation_id, new.text);
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
    INSERT INTO messages_fts (rowid, conv, text) VALUES (new.id, 'c' || new.conversation_id, new.text);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;
