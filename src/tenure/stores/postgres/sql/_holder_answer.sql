-- The answer of a holder operation (renew, complete, release, fail), included by each of
-- their files: the applied row, or the job as it is now.
SELECT 'applied' AS status, a.*, clock.now, false AS raced FROM applied AS a, clock
UNION ALL
-- Not applied: the job as this statement's snapshot saw it. When that version would have
-- matched, a concurrent writer changed the job meanwhile (raced): the driver runs the
-- statement again rather than report a version that is already gone.
SELECT CASE WHEN j.job_id IS NULL THEN 'missing' ELSE 'missed' END, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now,
    coalesce(
        j.state = 'leased'
        AND j.owner = %(owner)s
        AND j.generation = %(generation)s::bigint
        AND j.secret_hash = %(secret_hash)s
        AND j.lease_until > clock.now,
        false
    )
FROM clock LEFT JOIN {schema}.tenure_jobs AS j ON j.job_id = %(job_id)s
WHERE NOT EXISTS (SELECT FROM applied)
