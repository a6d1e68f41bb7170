-- Giving a job back is not a failed attempt: the attempt is refunded.
UPDATE tenure_jobs
SET state = 'ready',
    secret_hash = :receipt,
    lease_until = NULL,
    available_at = :now,
    attempts = attempts - 1,
    updated_at = :now
WHERE job_id = :job_id
  AND state = 'leased'
  AND owner = :owner
  AND generation = :generation
  AND secret_hash = :secret_hash
  AND lease_until > :now
RETURNING job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
