-- One batch of a purge: up to :limit jobs in :states last changed at :cutoff or before,
-- oldest first (by tenure_jobs_finished); answers each deleted job's generation.
DELETE FROM tenure_jobs
WHERE seq IN (
    SELECT seq FROM tenure_jobs
    WHERE state IN ('done', 'dead', 'cancelled')
      AND state IN (SELECT value FROM json_each(:states))
      AND updated_at <= :cutoff
    ORDER BY updated_at
    LIMIT :limit
)
RETURNING generation
