-- Insert if absent. An existing job is left unchanged and reported. (Rarely, a concurrent
-- submit of the same id commits after this statement's snapshot: then no row comes back
-- and the driver reads the job with get.sql.)
{include:_clock},
applied AS (
    INSERT INTO {schema}.tenure_jobs AS j
        (job_id, queue, state, generation, available_at, attempts, max_attempts, payload,
         created_at, updated_at, priority, timeout, headers)
    SELECT %(job_id)s, %(queue)s, 'ready', 0, clock.now + %(delay)s::float8, 0,
           %(max_attempts)s::integer, %(payload)s::text, clock.now, clock.now,
           %(priority)s::integer, %(timeout)s::float8, %(headers)s::text
    FROM clock
    ON CONFLICT (job_id) DO NOTHING
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
)
SELECT 'applied' AS status, a.*, clock.now FROM applied AS a, clock
UNION ALL
SELECT 'missed', j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now
FROM {schema}.tenure_jobs AS j, clock
WHERE j.job_id = %(job_id)s AND NOT EXISTS (SELECT FROM applied)
