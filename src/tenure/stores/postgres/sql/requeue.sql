-- Make a finished job (done, dead, cancelled) ready again at now + delay. Its generation is
-- kept (the next claim takes the next one); its attempts too unless reset, and a job that
-- used all its attempts gets one more. The result of a done job is cleared.
{include:_clock},
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'ready',
        secret_hash = NULL,
        lease_until = NULL,
        available_at = clock.now + %(delay)s::float8,
        attempts = CASE WHEN %(reset_attempts)s::boolean THEN 0 ELSE j.attempts END,
        max_attempts = CASE WHEN %(reset_attempts)s::boolean THEN j.max_attempts
                            ELSE greatest(j.max_attempts, j.attempts + 1) END,
        result = NULL,
        updated_at = clock.now
    FROM clock
    WHERE j.job_id = %(job_id)s
      AND j.state = ANY (%(takes)b::text[])
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
)
{include:_control_answer}
