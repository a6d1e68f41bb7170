-- The attempts of one job, oldest first (tenure.AsyncStore.attempts).
SELECT t.generation, t.owner, t.started_at, t.ended_at, t.ending, t.error
FROM {schema}.tenure_attempts AS t
WHERE t.job_id = %(job_id)s
ORDER BY t.generation
