-- tenure schema, version 15 (issue #19): batches of a thousand cost a thousand times one,
-- not a million. The attempt history's trigger (tenure_jobs_updated) paired each job's old
-- and new rows with joins of the two transition tables. Its plans are cached for the
-- session, made at its first call, usually a statement of a few rows: a nested loop that
-- reads one table once per row of the other, a million rows for a batch of 1,000 (about
-- 75 ms of a renew_many or complete_many of 1,000, which stopped at the first check).
-- Now each old row's new version is the job's row in the table, read by a primary-key
-- probe per old row (a LATERAL subquery: a loop over the old rows, one probe each, for a
-- statement of one row as for one of 1,000), so the trigger keeps no NEW TABLE; and each
-- ended attempt is found by a primary-key probe per ended lease and updated by its row's
-- address, with no array of job ids that each probe would sort again
-- (tests/postgres/test_batch_plans.py). The same rows, answers and notifications as before.
CREATE OR REPLACE FUNCTION {schema}.tenure_jobs_updated() RETURNS trigger
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    trimmed text[];
    trimmed_job text;
BEGIN
    -- Each job's new row is its row in the table now: a statement updates a row once, and
    -- no other writer can change it before this statement's transaction ends. It is read by
    -- primary key, a probe per old row (LATERAL ... OFFSET 0: a loop over the old rows, as
    -- a join of the two transition tables need not be), so that a statement of one row
    -- costs one probe and one of 1,000 a thousand, whatever plan the session made first.
    -- Most statements change no job's state or generation (renewals, above all): they
    -- stop here.
    IF NOT EXISTS (
        SELECT FROM tenure_old AS o
        CROSS JOIN LATERAL (
            SELECT j.state, j.generation FROM {schema}.tenure_jobs AS j
            WHERE j.job_id = o.job_id OFFSET 0
        ) AS n
        WHERE (o.state <> n.state OR o.generation <> n.generation)
          AND (o.state = 'leased' OR n.state <> 'ready')
    ) THEN
        RETURN NULL;
    END IF;
    WITH changed AS MATERIALIZED (
        SELECT o.job_id, o.state AS old_state, o.generation AS old_generation,
               n.state, n.generation, n.owner, n.updated_at, n.secret_hash, n.error,
               n.state = 'ready' AND n.attempts < o.attempts AS released
        FROM tenure_old AS o
        CROSS JOIN LATERAL (
            SELECT j.state, j.generation, j.owner, j.updated_at, j.secret_hash, j.error,
                   j.attempts
            FROM {schema}.tenure_jobs AS j
            WHERE j.job_id = o.job_id OFFSET 0
        ) AS n
        WHERE (o.state = 'leased' OR n.state = 'leased')
          AND (o.state <> n.state OR o.generation <> n.generation)
    ),
    -- The open attempt of each lease that ended, found by primary key (a subquery run
    -- once per changed job: unlike a join, never planned as a read of the whole history)
    -- and updated by its row's address.
    ending AS MATERIALIZED (
        SELECT c.job_id, c.state, c.updated_at, c.secret_hash, c.error, c.released,
               (SELECT t.ctid FROM {schema}.tenure_attempts AS t
                WHERE t.job_id = c.job_id AND t.generation = c.old_generation
                  AND t.ended_at IS NULL) AS row_id
        FROM changed AS c
        WHERE c.old_state = 'leased'
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
        FROM ending AS c
        WHERE t.ctid = c.row_id
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
    PERFORM pg_notify('tenure_end_' || TG_TABLE_SCHEMA, o.job_id)
    FROM tenure_old AS o
    CROSS JOIN LATERAL (
        SELECT j.state FROM {schema}.tenure_jobs AS j WHERE j.job_id = o.job_id OFFSET 0
    ) AS n
    WHERE n.state NOT IN ('ready', 'leased') AND o.state <> n.state
      AND EXISTS (SELECT FROM {schema}.tenure_waiters AS w WHERE w.job_id = o.job_id);
    RETURN NULL;
END
$$;

-- Only the old rows are kept for it now.
DROP TRIGGER tenure_jobs_updated ON {schema}.tenure_jobs;
-- A trigger with transition tables cannot name columns: every UPDATE runs it.
CREATE TRIGGER tenure_jobs_updated
    AFTER UPDATE ON {schema}.tenure_jobs
    REFERENCING OLD TABLE AS tenure_old
    FOR EACH STATEMENT
    EXECUTE FUNCTION {schema}.tenure_jobs_updated();
