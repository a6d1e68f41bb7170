-- tenure schema, version 6 (issue #18): store schedules (`tenure schedules`). Each row is a
-- periodic job that every worker serving its queue runs as it runs its own
-- @worker.periodic ones (one job per tick across the fleet: the tick's job id is derived
-- from the name). Times are store time.
CREATE TABLE tenure_schedules (
    name         TEXT PRIMARY KEY,
    cron         TEXT NOT NULL,
    queue        TEXT NOT NULL,
    payload      TEXT,
    timezone     TEXT NOT NULL,
    catch_up     TEXT NOT NULL CHECK (catch_up IN ('skip', 'once')),
    max_attempts INTEGER NOT NULL,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL
) WITHOUT ROWID;
