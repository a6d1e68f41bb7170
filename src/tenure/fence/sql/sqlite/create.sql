-- The fence table: per job, the highest generation this database accepted a write for.
-- Created by tenure on first use, inside the guarded transaction.
CREATE TABLE IF NOT EXISTS tenure_fence (
    job_id     TEXT NOT NULL PRIMARY KEY,
    generation INTEGER NOT NULL CHECK (generation >= 1),
    updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP  -- UTC, 'YYYY-MM-DD HH:MM:SS'
) WITHOUT ROWID
