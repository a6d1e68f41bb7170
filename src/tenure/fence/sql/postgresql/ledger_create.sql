-- The effect ledger: which effects (job id, effect key) this database has applied, and
-- the generation that applied each.
CREATE TABLE IF NOT EXISTS tenure_effects (
    job_id     TEXT NOT NULL,
    effect_key TEXT NOT NULL,
    generation BIGINT NOT NULL CHECK (generation >= 1),
    applied_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (job_id, effect_key)
)
