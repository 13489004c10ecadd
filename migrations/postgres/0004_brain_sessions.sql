-- Brains that keep their own session (a CLI agent resumed by id): which session belongs to a
-- conversation's agent, and the newest message it has been given.
CREATE TABLE brain_sessions (
    conversation_id          BIGINT NOT NULL REFERENCES conversations (id),
    agent                    TEXT   NOT NULL,
    brain                    TEXT   NOT NULL,
    session_id               TEXT   NOT NULL,
    last_injected_message_id BIGINT NOT NULL,
    updated_at               BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, agent)
);
