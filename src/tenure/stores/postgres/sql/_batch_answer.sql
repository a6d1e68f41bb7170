-- The answer of a batch of holder updates (complete_many's, renew_many's), unordered: one
-- row per item of "todo", with its input position: the row "applied" returned, or the job
-- as it is now. Both batches apply under the lease condition of _held.sql, restated below.
SELECT * FROM applied
UNION ALL
-- Not applied: the job as this statement's snapshot saw it. When that version would have
-- matched, a concurrent writer changed the job meanwhile (raced): the driver runs those
-- items again rather than report a version that is already gone.
SELECT CASE WHEN j.job_id IS NULL THEN 'missing' ELSE 'missed' END, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now,
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
-- A hashed NOT IN: an anti join of the two could be planned as a read of one per row of
-- the other (see _held.sql).
WHERE t.position NOT IN (SELECT a.position FROM applied AS a)
