-- tenure schema, version 8 (issue #18): job priorities and a per-job timeout. Claims take
-- the highest priority first, then the oldest by (available_at, seq), so the claim index
-- leads with the priority, descending (pick.sql). A job of an older schema has priority 0
-- and no timeout of its own (its handler's applies).
ALTER TABLE tenure_jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0
    CHECK (priority BETWEEN -2147483648 AND 2147483647);
ALTER TABLE tenure_jobs ADD COLUMN timeout REAL CHECK (timeout IS NULL OR timeout > 0);

DROP INDEX tenure_jobs_claimable;
CREATE INDEX tenure_jobs_claimable
    ON tenure_jobs (queue, priority DESC, available_at, seq)
    WHERE state IN ('ready', 'leased');
