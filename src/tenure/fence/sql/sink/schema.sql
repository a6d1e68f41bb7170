-- The reference sink's own tables (next to tenure_fence and tenure_effects).
-- Accepted records, in the order they were accepted (id).
CREATE TABLE IF NOT EXISTS sink_records (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id      TEXT NOT NULL,
    generation  INTEGER NOT NULL,
    effect_key  TEXT,
    value       TEXT,            -- the request body, JSON text
    accepted_at REAL NOT NULL    -- the sink's wall clock, seconds since the epoch (informative)
);
CREATE INDEX IF NOT EXISTS sink_records_job ON sink_records (job_id, id);
-- Refused requests, in the order they were refused.
CREATE TABLE IF NOT EXISTS sink_rejections (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                 TEXT NOT NULL,   -- stale, strict, bad-signature, unsigned, ..., duplicate
    status               INTEGER NOT NULL,
    job_id               TEXT,
    presented_generation INTEGER,
    current_generation   INTEGER,
    effect_key           TEXT,
    detail               TEXT NOT NULL,
    method               TEXT,
    path                 TEXT,
    rejected_at          REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sink_rejections_job ON sink_rejections (job_id, id);
