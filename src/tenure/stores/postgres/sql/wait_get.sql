-- store.wait: the job as its last writer committed it. FOR SHARE conflicts with a writer
-- in flight, which may be a completion that passed the trigger before this waiter's
-- registration was visible to it (so it will notify nobody): NOWAIT fails at once (55P03)
-- and the driver reads again shortly, rather than blocking past the wait's timeout behind
-- a long transaction. The job columns are NULL when the job is missing.
{include:_read_clock}
SELECT clock.now, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
FROM clock LEFT JOIN LATERAL (
    SELECT * FROM {schema}.tenure_jobs WHERE job_id = %(job_id)s FOR SHARE NOWAIT
) AS j ON true
