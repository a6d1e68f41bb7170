-- The answer of a job-control operation (cancel, requeue, delete), included by each of
-- their files after their "applied" CTE: the applied row, or the job as it is now, with
-- raced true when that version would have matched (a concurrent writer changed the job
-- after this statement's snapshot: the driver runs the statement again).
SELECT 'applied' AS status, a.*, clock.now, false AS raced FROM applied AS a, clock
UNION ALL
SELECT CASE WHEN j.job_id IS NULL THEN 'missing' ELSE 'missed' END, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now,
    coalesce(j.state = ANY (%(takes)b::text[]), false)
FROM clock LEFT JOIN {schema}.tenure_jobs AS j ON j.job_id = %(job_id)s
WHERE NOT EXISTS (SELECT FROM applied)
