-- One batch of a purge: delete up to %(limit)s finished jobs in %(states)s last changed at
-- least %(older_than)s seconds ago by store time, oldest first, and raise the generation
-- floor to the highest generation deleted (see delete.sql). The pick walks
-- tenure_jobs_finished (a plan test checks it) and skips rows other writers lock, so a
-- batch is one short transaction that never waits. Answers the count and the store time.
{include:_clock},
picked AS MATERIALIZED (
    SELECT j.job_id
    FROM {schema}.tenure_jobs AS j
    WHERE j.state IN ('done', 'dead', 'cancelled')
      AND j.state = ANY (%(states)b::text[])
      -- finished_at: updated_at while finished (a generated column; tenure_jobs_finished).
      AND j.finished_at <= (SELECT now FROM clock) - %(older_than)s::float8
    ORDER BY j.finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM {schema}.tenure_jobs AS j
    USING picked AS p
    WHERE j.job_id = p.job_id
    RETURNING j.job_id, j.generation
),
history AS (
    -- The deleted jobs' attempt histories go with them.
    DELETE FROM {schema}.tenure_attempts AS t
    USING gone AS g
    WHERE t.job_id = g.job_id
),
floor AS (
    UPDATE {schema}.tenure_floor AS f
    SET generation = greatest(f.generation, (SELECT max(g.generation) FROM gone AS g))
    WHERE f.id = 0 AND EXISTS (SELECT FROM gone)
)
SELECT (SELECT count(*) FROM gone) AS deleted, clock.now FROM clock
