-- The fence table: per job, the highest generation this database accepted a write for.
CREATE TABLE IF NOT EXISTS tenure_fence (
    job_id     TEXT NOT NULL PRIMARY KEY,
    generation BIGINT NOT NULL CHECK (generation >= 1),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP
)
