-- store.wait: the job once its writers in flight have committed (FOR SHARE waits for a
-- completion that has already passed the trigger, before this waiter's registration was
-- visible to it, and reads what that completion committed). The job columns are NULL when
-- the job is missing.
WITH clock AS MATERIALIZED (
    -- Store time, read once: the server's clock (or the test hook's, floored).
    SELECT coalesce(
        (SELECT greatest(floor, %(now)s::float8) FROM {schema}.tenure_clock
         WHERE %(now)s::float8 IS NOT NULL),
        extract(epoch FROM clock_timestamp())::float8
    ) AS now
)
SELECT clock.now, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at
FROM clock LEFT JOIN LATERAL (
    SELECT * FROM {schema}.tenure_jobs WHERE job_id = %(job_id)s FOR SHARE
) AS j ON true
