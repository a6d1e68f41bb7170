-- One page of a listing (list_jobs): jobs after the cursor (a submission number), oldest
-- first, optionally of one queue, state and owner, created at or before :created_before.
-- Walks the rowid (seq) from the cursor, so a page costs its rows plus those it skips.
SELECT job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers, seq
FROM tenure_jobs
WHERE seq > :after
  AND (:queue IS NULL OR queue = :queue)
  AND (:state IS NULL OR state = :state)
  AND (:owner IS NULL OR owner = :owner)
  AND (:created_before IS NULL OR created_at <= :created_before)
ORDER BY seq
LIMIT :limit
