-- Done, by the live lease only. The secret hash stays, so a repeated complete is recognised.
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
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'done',
        result = %(result)s::text,
        lease_until = NULL,
        available_at = clock.now,
        updated_at = clock.now
    FROM clock
    WHERE j.job_id = %(job_id)s
      AND j.state = 'leased'
      AND j.owner = %(owner)s
      AND j.generation = %(generation)s::bigint
      AND j.secret_hash = %(secret_hash)s
      AND j.lease_until > clock.now
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at
)
{include:_holder_answer}
