-- Done, by the live lease only. The secret hash gives way to the receipt of this complete,
-- so that a retried complete is recognised and a release or fail of the ended lease is not.
UPDATE tenure_jobs
SET state = 'done',
    result = :result,
    secret_hash = :receipt,
    lease_until = NULL,
    available_at = :now,
    updated_at = :now
WHERE job_id = :job_id
  AND state = 'leased'
  AND owner = :owner
  AND generation = :generation
  AND secret_hash = :secret_hash
  AND lease_until > :now
RETURNING job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
