-- tenure schema, version 14: plans that stay good whatever the planner believes of the
-- tables' sizes. Plans are cached per session (tenure's connections keep generic plans,
-- configure.sql), costed from the tables' statistics: once a purge had emptied a table and
-- (auto)vacuum or analyze had recorded it empty, a plan made then read the whole table at
-- every claim and completion until the next analyze (benchmarks/postgres_stale_stats.py:
-- claims at a fifth of their speed after the history was recorded empty, a twentieth after
-- the jobs table was). The same rows, answers and notifications as before.
--
-- tenure_jobs_leased: its predicate said "seq > 0" (only statements that say it too can use
-- the index), which tenure_jobs_by_seq answers too; the expired-lease pick then walked that
-- index, every job, when the statistics said the table was empty. Now "lease_min_end IS
-- NOT NULL", true of every leased job (tenure_jobs_lease_min_end_check), and the statements
-- that walk the index (tenure_queue_room below, the pick, next_due, find_leases,
-- queue_stats) say that instead.
DROP INDEX {schema}.tenure_jobs_leased;
CREATE INDEX tenure_jobs_leased
    ON {schema}.tenure_jobs (queue, lease_min_end)
    WHERE state = 'leased' AND lease_min_end IS NOT NULL;

CREATE OR REPLACE FUNCTION {schema}.tenure_queue_room(
    p_queues text[], p_now double precision, p_test_now double precision, p_settled text[]
) RETURNS TABLE (queue text, room bigint, now double precision, tokens double precision)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    PERFORM FROM {schema}.tenure_queues AS q
    WHERE q.queue = ANY (p_queues)
      AND (q.max_leased IS NOT NULL OR q.rate_per_second IS NOT NULL)
    ORDER BY q.queue
    FOR NO KEY UPDATE;
    -- The time is read inside this query, so after its snapshot: a lease settled before
    -- the snapshot (and so not counted) ended at a time read before its commit, before it.
    RETURN QUERY
    SELECT b.queue,
           greatest(least(b.places, floor(b.tokens + 1e-5 * b.rate)::bigint), 0)::bigint,
           b.now, b.tokens
    FROM (
        SELECT q.queue, t.now,
               CASE WHEN q.max_leased IS NOT NULL THEN q.max_leased - (
                   SELECT count(*) FROM {schema}.tenure_jobs AS j
                   WHERE j.queue = q.queue
                     AND j.state = 'leased'
                     AND j.lease_min_end IS NOT NULL  -- the predicate of tenure_jobs_leased (schema.sql says why)
                     AND j.lease_until > t.now
                     AND j.job_id <> ALL (p_settled)
               ) END AS places,
               q.rate_per_second AS rate,
               least(q.rate_burst::float8,
                     q.rate_tokens + greatest(t.now - q.rate_at, 0) * q.rate_per_second)
                   AS tokens
        FROM (SELECT CASE WHEN p_test_now IS NULL
                          THEN greatest(p_now, extract(epoch FROM clock_timestamp())::float8)
                          ELSE p_now END AS now) AS t
        CROSS JOIN {schema}.tenure_queues AS q
        WHERE q.queue = ANY (p_queues)
          AND (q.max_leased IS NOT NULL OR q.rate_per_second IS NOT NULL)
    ) AS b;
END
$$;

-- The attempt history's trigger (tenure_jobs_updated, migration 0012) turns sequential
-- scans off for its own statements, each statement names the jobs it touches as an array
-- that every index path probes, and the trim of attempts beyond the newest 100 runs only
-- for a claim past generation 100, as a statement of its own.
CREATE OR REPLACE FUNCTION {schema}.tenure_jobs_updated() RETURNS trigger
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    trimmed text[];
    trimmed_job text;
BEGIN
    -- Most statements that start, end and finish nothing are renewals: they stop here, at
    -- one small join of their own rows, before the plans below are started.
    IF NOT EXISTS (
        SELECT FROM tenure_old AS o
        JOIN tenure_new AS n USING (job_id)
        WHERE (o.state <> n.state OR o.generation <> n.generation)
          AND (o.state = 'leased' OR n.state <> 'ready')
    ) THEN
        RETURN NULL;
    END IF;
    WITH changed AS MATERIALIZED (
        SELECT n.job_id, o.state AS old_state, o.generation AS old_generation,
               n.state, n.generation, n.owner, n.updated_at, n.secret_hash, n.error,
               n.state = 'ready' AND n.attempts < o.attempts AS released
        FROM tenure_old AS o
        JOIN tenure_new AS n USING (job_id)
        WHERE (o.state = 'leased' OR n.state = 'leased')
          AND (o.state <> n.state OR o.generation <> n.generation)
    ),
    ended AS (
        UPDATE {schema}.tenure_attempts AS t
        SET ended_at = c.updated_at,
            ending = CASE
                WHEN c.state = 'leased' THEN 'lost'
                WHEN c.state = 'done' THEN 'completed'
                WHEN c.state = 'cancelled' THEN 'cancelled'
                WHEN c.state = 'dead' AND c.secret_hash IS NULL THEN 'dead'
                WHEN c.released THEN 'released'
                ELSE 'failed' END,
            error = CASE WHEN c.state IN ('cancelled', 'ready', 'dead') AND NOT c.released
                         THEN c.error END
        FROM changed AS c
        WHERE c.old_state = 'leased'
          AND t.job_id = c.job_id AND t.generation = c.old_generation AND t.ended_at IS NULL
          AND t.job_id = ANY (ARRAY(SELECT e.job_id FROM changed AS e
                                    WHERE e.old_state = 'leased'))
    ),
    started AS (
        INSERT INTO {schema}.tenure_attempts (job_id, generation, owner, started_at)
        SELECT c.job_id, c.generation, c.owner, c.updated_at
        FROM changed AS c
        WHERE c.state = 'leased' AND c.generation <> c.old_generation
    )
    -- More than 100 attempts only if one is 100 generations old (generations are
    -- distinct): only a claim past generation 100 may have some to drop.
    SELECT array_agg(c.job_id) INTO trimmed
    FROM changed AS c
    WHERE c.state = 'leased' AND c.generation <> c.old_generation AND c.generation > 100;
    -- A statement of its own, so it sees the attempt started above: the newest 100 stay.
    FOREACH trimmed_job IN ARRAY coalesce(trimmed, '{}') LOOP
        DELETE FROM {schema}.tenure_attempts AS t
        WHERE t.job_id = trimmed_job
          AND t.generation <= (SELECT o.generation FROM {schema}.tenure_attempts AS o
                               WHERE o.job_id = trimmed_job
                               ORDER BY o.generation DESC OFFSET 100 LIMIT 1);
    END LOOP;
    PERFORM pg_notify('tenure_end_' || TG_TABLE_SCHEMA, n.job_id)
    FROM tenure_old AS o
    JOIN tenure_new AS n USING (job_id)
    WHERE n.state NOT IN ('ready', 'leased') AND o.state <> n.state
      AND EXISTS (SELECT FROM {schema}.tenure_waiters AS w WHERE w.job_id = n.job_id);
    RETURN NULL;
END
$$;
