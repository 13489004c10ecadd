-- The foundation: conversations, their messages, durable tasks, the outbox and channel cursors.
-- Times are unix milliseconds (UTC).

CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,
    channel     TEXT    NOT NULL,          -- channel instance, e.g. 'webhook:default'
    external_id TEXT    NOT NULL,          -- the conversation's id on that channel
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (channel, external_id)
);

CREATE TABLE messages (
    id                  INTEGER PRIMARY KEY,
    conversation_id     INTEGER NOT NULL REFERENCES conversations (id),
    channel_message_id  TEXT    NOT NULL,  -- the id on the channel (or the delivery key of an answer)
    sender_id           TEXT    NOT NULL,
    sender_name         TEXT,
    sender_kind         TEXT    NOT NULL,  -- user | guest | bot | self_bot | system
    role                TEXT    NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    kind                TEXT    NOT NULL DEFAULT 'message', -- message | ack | progress
    text                TEXT    NOT NULL,
    created_at          INTEGER NOT NULL,  -- when it was written, per the channel
    stored_at           INTEGER NOT NULL,
    reply_to_channel_id TEXT,
    reply_to_message_id INTEGER REFERENCES messages (id),
    source_type         TEXT,              -- talk | email | webhook | briefing | scheduled | ...
    task_id             INTEGER,           -- for answers: the task that produced it
    agent               TEXT,              -- for answers: the agent that wrote it
    audience            TEXT    NOT NULL DEFAULT '{"kind":"everyone"}', -- JSON Audience
    actions             TEXT,              -- JSON list of actions the assistant took
    meta                TEXT,              -- JSON, channel specific
    edited_at           INTEGER,
    deleted_at          INTEGER,
    UNIQUE (conversation_id, channel_message_id)
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, created_at, id);

CREATE TABLE tasks (
    id                       INTEGER PRIMARY KEY,
    conversation_id          INTEGER NOT NULL REFERENCES conversations (id),
    message_id               INTEGER REFERENCES messages (id), -- the trigger
    dedup_key                TEXT    NOT NULL UNIQUE,
    source_type              TEXT    NOT NULL,
    agent                    TEXT    NOT NULL,
    brain                    TEXT    NOT NULL,
    status                   TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    attempts                 INTEGER NOT NULL DEFAULT 0,
    max_attempts             INTEGER NOT NULL,
    available_at             INTEGER NOT NULL,
    lease_owner              TEXT,
    lease_expires_at         INTEGER,
    last_error               TEXT,
    result_text              TEXT,
    actions                  TEXT,
    context                  TEXT,     -- JSON: what the prompt held and why
    prompt_tokens            INTEGER,
    completion_tokens        INTEGER,
    triage_prompt_tokens     INTEGER,
    triage_completion_tokens INTEGER,
    created_at               INTEGER NOT NULL,
    updated_at               INTEGER NOT NULL,
    finished_at              INTEGER
);
CREATE INDEX tasks_due ON tasks (status, available_at);
CREATE INDEX tasks_by_conversation ON tasks (conversation_id, status, id);

CREATE TABLE task_attempts (
    task_id     INTEGER NOT NULL REFERENCES tasks (id),
    attempt     INTEGER NOT NULL,
    worker      TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    outcome     TEXT,   -- completed | retry | failed | released | lease_lost | lease_expired
    error       TEXT,
    PRIMARY KEY (task_id, attempt)
);

CREATE TABLE outbox (
    id                 INTEGER PRIMARY KEY,
    task_id            INTEGER REFERENCES tasks (id),
    conversation_id    INTEGER NOT NULL REFERENCES conversations (id),
    channel            TEXT    NOT NULL,
    idempotency_key    TEXT    NOT NULL UNIQUE,
    kind               TEXT    NOT NULL DEFAULT 'result',
    text               TEXT    NOT NULL,
    reply_to           TEXT,             -- channel message id answered
    meta               TEXT,
    status             TEXT    NOT NULL CHECK (status IN ('pending', 'delivering', 'delivered', 'failed')),
    attempts           INTEGER NOT NULL DEFAULT 0,
    available_at       INTEGER NOT NULL,
    lease_owner        TEXT,
    lease_expires_at   INTEGER,
    last_error         TEXT,
    channel_message_id TEXT,
    created_at         INTEGER NOT NULL,
    delivered_at       INTEGER
);
CREATE INDEX outbox_due ON outbox (status, available_at);

CREATE TABLE cursors (
    channel    TEXT    NOT NULL,
    scope      TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (channel, scope)
);
