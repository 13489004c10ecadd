-- Sessions per agent are renewed when the agent's prompt changes, when they have taken in too
-- many input tokens, after an idle time, or on an admin reset (renew_reason set).
ALTER TABLE brain_sessions ADD COLUMN prompt_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE brain_sessions ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE brain_sessions ADD COLUMN started_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE brain_sessions ADD COLUMN renew_reason TEXT;
