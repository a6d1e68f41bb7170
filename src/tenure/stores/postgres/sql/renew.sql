-- Extend a live lease held by this owner, generation and secret.
{include:_clock},
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET lease_until = clock.now + %(ttl)s::float8,
        available_at = clock.now + %(ttl)s::float8,
        -- Lowered only by a shorter lease; otherwise the same value, and the update HOT.
        lease_min_end = least(j.lease_min_end, clock.now + %(ttl)s::float8),
        updated_at = clock.now
    FROM clock
    WHERE j.job_id = %(job_id)s
      AND j.state = 'leased'
      AND j.owner = %(owner)s
      AND j.generation = %(generation)s::bigint
      AND j.secret_hash = %(secret_hash)s
      AND j.lease_until > clock.now
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
)
{include:_holder_answer}
