-- Delete a job in :takes (done, dead, cancelled); the driver raises the floor (raise_floor.sql)
-- to its generation in the same transaction.
DELETE FROM tenure_jobs
WHERE job_id = :job_id
  AND state IN (SELECT value FROM json_each(:takes))
RETURNING job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
