-- renew.sql for many leases in one statement, at one store time: the i-th element of each
-- array is the i-th renewal ("todo"), checked exactly as renew.sql checks its one job, with
-- its own ttl. One answer row per renewal, in input order (position): the renewed row, or
-- the job as it is now.
{include:_clock},
todo AS MATERIALIZED (
    SELECT t.job_id, t.owner, t.generation, t.secret_hash, t.ttl, t.position
    FROM unnest(
        %(job_ids)b::text[],
        %(owners)b::text[],
        %(generations)b::bigint[],
        %(held_hashes)b::text[],
        %(ttls)b::float8[]
    ) WITH ORDINALITY AS t (job_id, owner, generation, secret_hash, ttl, position)
    ORDER BY t.job_id  -- the order of the row locks (_held.sql)
),
{include:_held}
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET lease_until = clock.now + t.ttl,
        available_at = clock.now + t.ttl,
        -- Lowered only by a shorter lease; otherwise the same value, and the update HOT.
        lease_min_end = least(j.lease_min_end, clock.now + t.ttl),
        updated_at = clock.now
    FROM held AS t, clock
    WHERE j.ctid = t.row_id
    RETURNING 'applied' AS status, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now, false AS raced, t.position
)
{include:_batch_answer}
ORDER BY position
