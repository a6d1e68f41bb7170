-- The effect ledger: which effects (job id, effect key) this database has applied, and
-- the generation that applied each. Created by tenure on first use.
CREATE TABLE IF NOT EXISTS tenure_effects (
    job_id     TEXT NOT NULL,
    effect_key TEXT NOT NULL,
    generation INTEGER NOT NULL CHECK (generation >= 1),
    applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,  -- UTC, 'YYYY-MM-DD HH:MM:SS'
    PRIMARY KEY (job_id, effect_key)
) WITHOUT ROWID
