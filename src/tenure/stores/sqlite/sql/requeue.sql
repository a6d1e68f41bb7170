-- A job in :takes (done, dead, cancelled) ready again at :now + :delay; generation kept,
-- attempts kept (one more if all were used) or reset, result cleared.
UPDATE tenure_jobs
SET state = 'ready',
    secret_hash = NULL,
    lease_until = NULL,
    available_at = :now + :delay,
    attempts = CASE WHEN :reset_attempts THEN 0 ELSE attempts END,
    max_attempts = CASE WHEN :reset_attempts THEN max_attempts
                        ELSE max(max_attempts, attempts + 1) END,
    result = NULL,
    updated_at = :now
WHERE job_id = :job_id
  AND state IN (SELECT value FROM json_each(:takes))
RETURNING job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
