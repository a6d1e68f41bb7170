-- Insert if absent. An existing job is left unchanged and reported. (Rarely, a concurrent
-- submit of the same id commits after this statement's snapshot: then no row comes back
-- and the driver reads the job with get.sql.)
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
applied AS (
    INSERT INTO {schema}.tenure_jobs AS j
        (job_id, queue, state, generation, available_at, attempts, max_attempts, payload,
         created_at, updated_at)
    SELECT %(job_id)s, %(queue)s, 'ready', 0, clock.now + %(delay)s::float8, 0,
           %(max_attempts)s::integer, %(payload)s::text, clock.now, clock.now
    FROM clock
    ON CONFLICT (job_id) DO NOTHING
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at
)
SELECT 'applied' AS status, a.*, clock.now FROM applied AS a, clock
UNION ALL
SELECT 'missed', j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, clock.now
FROM {schema}.tenure_jobs AS j, clock
WHERE j.job_id = %(job_id)s AND NOT EXISTS (SELECT FROM applied)
