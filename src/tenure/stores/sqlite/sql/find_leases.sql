-- The running leases of :owner on jobs of the queues :queues (a JSON array) whose secret
-- hash is one of :secret_hashes (a JSON array): what a claim whose reply was lost took
-- (only that claim knows those hashes), in claim order (highest priority, then oldest).
-- Such a lease ends by :now + :ttl (it was granted at or before :now). Rarely run (after a
-- lost reply): the queue's leased rows in tenure_jobs_listing are filtered, not bounded.
SELECT job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
FROM tenure_jobs
WHERE queue IN (SELECT value FROM json_each(:queues))
  AND state IN ('ready', 'leased')
  AND available_at > :now
  AND available_at <= :now + :ttl
  AND state = 'leased'
  AND owner = :owner
  AND secret_hash IN (SELECT value FROM json_each(:secret_hashes))
  AND lease_until > :now
ORDER BY priority DESC, available_at, seq
