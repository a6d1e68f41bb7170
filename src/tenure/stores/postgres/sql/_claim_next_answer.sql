-- The answer of a batch claim (see _claim_next_ctes.sql), unordered: each claimed job with
-- its position, then each buried one, then each raced one. Columns as in _batch_answer.sql.
SELECT * FROM claimed
UNION ALL
SELECT * FROM buried
UNION ALL
-- Raced: picked, and claimable as this statement's snapshot saw it, but not claimed. A
-- concurrent writer changed the job after the snapshot, and the pick's lock found it still
-- claimable as it now is, at an address the snapshot does not see, so the update by
-- address could not take it: the driver claims again for the places these took
-- (take_claims in _params.py). The job as the snapshot saw it, by a probe of its own.
SELECT 'missed', j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now, true AS raced, NULL::bigint AS position
FROM picked AS p
CROSS JOIN LATERAL (
    SELECT e.* FROM {schema}.tenure_jobs AS e WHERE e.job_id = p.job_id OFFSET 0
) AS j
CROSS JOIN clock
WHERE NOT p.buryable
  AND p.job_id NOT IN (SELECT c.job_id FROM claimed AS c)
  -- What the claim's update also asks: a job it refuses for this is not raced.
  AND j.attempts < j.max_attempts
