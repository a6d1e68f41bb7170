-- Accept a token whose generation is at least the highest this database has accepted for
-- the job, and record it; one atomic statement. No row changed means the token is stale.
-- Placeholders: job id, generation (qmark style; converted for format-style drivers).
INSERT INTO tenure_fence (job_id, generation, updated_at)
VALUES (?, ?, CURRENT_TIMESTAMP)
ON CONFLICT (job_id) DO UPDATE
SET generation = excluded.generation,
    updated_at = excluded.updated_at
WHERE tenure_fence.generation <= excluded.generation
