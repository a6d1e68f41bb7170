-- The CTEs of a batch completion (included by complete_many.sql and complete_and_claim.sql,
-- after "clock"): the i-th element of each array is the i-th completion ("todo"), checked
-- exactly as complete.sql checks its one job ("held"), and applied ("applied", which
-- returns answer rows: status, the job's columns, store time, raced (false), position).
todo AS MATERIALIZED (
    SELECT t.job_id, t.owner, t.generation, t.secret_hash, t.receipt, t.result, t.position
    FROM unnest(
        %(job_ids)b::text[],
        %(owners)b::text[],
        %(generations)b::bigint[],
        %(held_hashes)b::text[],
        %(receipts)b::text[],
        %(results)b::text[]
    ) WITH ORDINALITY AS t (job_id, owner, generation, secret_hash, receipt, result, position)
    ORDER BY t.job_id  -- the order of the row locks (_held.sql)
),
{include:_held}
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'done',
        result = t.result,
        secret_hash = t.receipt,
        lease_until = NULL,
        available_at = clock.now,
        updated_at = clock.now
    FROM held AS t, clock
    WHERE j.ctid = t.row_id
    RETURNING 'applied' AS status, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now, false AS raced, t.position
)
