-- Claim when free or expired by store time; every claim is a new generation and an attempt.
UPDATE tenure_jobs
SET state = 'leased',
    owner = :owner,
    -- Above the floor of deleted jobs' generations (tenure_floor): never a reissue.
    generation = max(generation, (SELECT generation FROM tenure_floor WHERE id = 0)) + 1,
    secret_hash = :secret_hash,
    lease_until = :now + :ttl,
    available_at = :now + :ttl,
    attempts = attempts + 1,
    claimed_at = :now,  -- the attempt's start (tenure_attempts gets it when it ends)
    updated_at = :now
WHERE job_id = :job_id
  AND state IN ('ready', 'leased')
  AND available_at <= :now
  AND attempts < max_attempts
  AND generation < :max_generation
RETURNING job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
