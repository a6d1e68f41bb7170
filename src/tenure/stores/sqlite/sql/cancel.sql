-- Cancel a job in :takes (ready or leased): cancelled, with the reason as its error. A
-- leased job's generation moves on, so its holder's token is stale.
UPDATE tenure_jobs
SET state = 'cancelled',
    generation = CASE WHEN state = 'leased' AND generation < :max_generation
                      THEN generation + 1 ELSE generation END,
    secret_hash = NULL,
    lease_until = NULL,
    available_at = :now,
    error = :reason,
    updated_at = :now
WHERE job_id = :job_id
  AND state IN (SELECT value FROM json_each(:takes))
RETURNING job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
