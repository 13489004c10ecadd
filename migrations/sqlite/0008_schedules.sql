-- Cron schedules (from config or the admin API) and their run history.
CREATE TABLE schedules (
    id                   INTEGER PRIMARY KEY,
    name                 TEXT    NOT NULL UNIQUE,
    source               TEXT    NOT NULL CHECK (source IN ('config', 'api')),
    spec                 TEXT    NOT NULL,  -- JSON ScheduleSpec
    enabled              INTEGER NOT NULL,
    next_fire_at         INTEGER,           -- unix ms; NULL = no further fire
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    max_failures         INTEGER NOT NULL,
    disabled_reason      TEXT,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
);
CREATE INDEX schedules_due ON schedules (enabled, next_fire_at);

CREATE TABLE schedule_runs (
    id          INTEGER PRIMARY KEY,
    schedule_id INTEGER NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    fire_at     INTEGER NOT NULL,          -- the fire time (unix ms), or the time of a manual run
    manual      INTEGER NOT NULL DEFAULT 0,
    task_id     INTEGER REFERENCES tasks (id),
    outcome     TEXT    NOT NULL,          -- pending | completed | silent | failed | skipped_stale
    detail      TEXT,
    created_at  INTEGER NOT NULL,
    UNIQUE (schedule_id, fire_at, manual)
);
CREATE INDEX schedule_runs_by_task ON schedule_runs (task_id);
