-- complete.sql for many jobs in one statement: the i-th element of each array is the i-th
-- completion, checked exactly as complete.sql checks its one job. One answer row per
-- completion, in input order (position): the applied row, or the job as it is now.
{include:_clock},
todo AS MATERIALIZED (
    SELECT t.job_id, t.owner, t.generation, t.secret_hash, t.result, t.position
    FROM unnest(
        %(job_ids)b::text[],
        %(owners)b::text[],
        %(generations)b::bigint[],
        %(secret_hashes)b::text[],
        %(results)b::text[]
    ) WITH ORDINALITY AS t (job_id, owner, generation, secret_hash, result, position)
    -- The update takes its row locks in this order: the same for every batch, so two
    -- batches sharing jobs wait for each other instead of deadlocking.
    ORDER BY t.job_id
),
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'done',
        result = t.result,
        lease_until = NULL,
        available_at = clock.now,
        updated_at = clock.now
    FROM todo AS t, clock
    WHERE j.job_id = t.job_id
      AND j.state = 'leased'
      AND j.owner = t.owner
      AND j.generation = t.generation
      AND j.secret_hash = t.secret_hash
      AND j.lease_until > clock.now
    RETURNING t.position, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at
)
SELECT 'applied' AS status, a.job_id, a.queue, a.state, a.owner, a.generation, a.secret_hash, a.lease_until, a.available_at, a.attempts, a.max_attempts, a.payload, a.result, a.error, a.created_at, a.updated_at, clock.now, false AS raced, a.position
FROM applied AS a, clock
UNION ALL
-- Not applied: the job as this statement's snapshot saw it. When that version would have
-- matched, a concurrent writer changed the job meanwhile (raced): the driver runs those
-- completions again rather than report a version that is already gone.
SELECT CASE WHEN j.job_id IS NULL THEN 'missing' ELSE 'missed' END, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, clock.now,
    coalesce(
        j.state = 'leased'
        AND j.owner = t.owner
        AND j.generation = t.generation
        AND j.secret_hash = t.secret_hash
        AND j.lease_until > clock.now,
        false
    ),
    t.position
FROM todo AS t CROSS JOIN clock LEFT JOIN {schema}.tenure_jobs AS j ON j.job_id = t.job_id
WHERE NOT EXISTS (SELECT FROM applied AS a WHERE a.position = t.position)
ORDER BY position
