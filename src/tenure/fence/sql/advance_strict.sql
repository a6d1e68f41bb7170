-- Strict fencing: accept only a generation higher than the highest accepted for the job,
-- so each generation writes once. No row changed means the token is stale or repeated.
INSERT INTO tenure_fence (job_id, generation, updated_at)
VALUES (?, ?, CURRENT_TIMESTAMP)
ON CONFLICT (job_id) DO UPDATE
SET generation = excluded.generation,
    updated_at = excluded.updated_at
WHERE tenure_fence.generation < excluded.generation
