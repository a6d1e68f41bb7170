-- An expired lease on the last allowed attempt: the job is dead, not claimable again.
-- The secret hash is cleared so that the late holder's complete/fail cannot pass for a repeat.
UPDATE tenure_jobs
SET state = 'dead',
    secret_hash = NULL,
    lease_until = NULL,
    error = coalesce(error, 'lease expired during the last allowed attempt'),
    updated_at = :now
WHERE job_id = :job_id
  AND state = 'leased'
  AND available_at <= :now
  AND attempts >= max_attempts
RETURNING job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
