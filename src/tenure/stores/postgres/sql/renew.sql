-- Extend a live lease held by this owner, generation and secret.
WITH floored AS (
    -- Only with the test hook (a store_clock given as %(now)s): its time never runs
    -- backwards. In production %(now)s is NULL and this touches nothing.
    UPDATE {schema}.tenure_clock SET floor = greatest(floor, %(now)s::float8)
    WHERE %(now)s::float8 IS NOT NULL
    RETURNING floor
),
clock AS MATERIALIZED (
    -- Store time, read once: the server's clock (or the hook's, floored).
    SELECT coalesce((SELECT floor FROM floored), extract(epoch FROM clock_timestamp())::float8)
        AS now
),
job AS MATERIALIZED (
    -- The job as it is now, locked: a concurrent writer is waited for, not raced.
    SELECT job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at
    FROM {schema}.tenure_jobs
    WHERE job_id = %(job_id)s
    FOR NO KEY UPDATE
),
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET lease_until = clock.now + %(ttl)s::float8,
        available_at = clock.now + %(ttl)s::float8,
        updated_at = clock.now
    FROM job AS c, clock
    WHERE j.job_id = c.job_id
      AND c.state = 'leased'
      AND c.owner = %(owner)s
      AND c.generation = %(generation)s::bigint
      AND c.secret_hash = %(secret_hash)s
      AND c.lease_until > clock.now
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at
)
SELECT 'applied' AS status, a.*, clock.now FROM applied AS a, clock
UNION ALL
SELECT CASE WHEN j.job_id IS NULL THEN 'missing' ELSE 'missed' END, j.*, clock.now
FROM clock LEFT JOIN job AS j ON true
WHERE NOT EXISTS (SELECT FROM applied)
