-- Cancel a ready or leased job: it becomes cancelled (final) with the reason as its error.
-- A leased job's generation moves on, so its holder's token is stale: its next renew,
-- complete, release or fail is refused, and fences reject its late effects.
{include:_clock},
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'cancelled',
        -- At least the timeline's base (_timeline.sql), as a claim's.
        generation = CASE WHEN j.state = 'leased' AND j.generation < %(max_generation)s::bigint
                          THEN greatest(j.generation + 1, {include:_timeline}) ELSE j.generation END,
        secret_hash = NULL,
        lease_until = NULL,
        available_at = clock.now,
        error = %(reason)s::text,
        updated_at = clock.now
    FROM clock
    WHERE j.job_id = %(job_id)s
      AND j.state = ANY (%(takes)b::text[])
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
)
{include:_control_answer}
