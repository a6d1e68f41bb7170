-- tenure schema, version 12: the attempt history (migration 0004) and the notification of
-- a finished job to its waiters (migration 0003) written by one trigger per statement
-- instead of two per row: the same rows and notifications, at less server CPU per job
-- when claims and completions come in batches.
DROP TRIGGER tenure_jobs_attempts ON {schema}.tenure_jobs;
DROP FUNCTION {schema}.tenure_record_attempt();
DROP TRIGGER tenure_jobs_ended ON {schema}.tenure_jobs;
DROP FUNCTION {schema}.tenure_notify_ended();

-- After every UPDATE statement on tenure_jobs, over its old and new rows (transition
-- tables), two things that must happen in the statement that changes a job, whoever wrote
-- it (claim, settle, cancel, a caller's own SQL):
--
-- * The attempt history. A lease ends when its job leaves the leased state, or when a
--   claim takes the job at a newer generation after it expired (lost). How it ended
--   follows from the update: done is completed; cancelled; dead with its secret hash
--   cleared is a burial, otherwise a fail; ready with the attempt refunded is a release,
--   otherwise a fail. A claim starts the next attempt, and drops the oldest beyond the
--   newest 100 of the job (tenure.models.ATTEMPTS_KEPT): a job retried forever keeps a
--   bounded history.
-- * A job that finishes (done, dead, or any final state: neither ready nor leased)
--   notifies its id on "tenure_end_<schema>", only when someone waits for it (see
--   tenure_waiters).
--
-- Once per statement, not once per row (migration 0012): a batch of 10 completions and 10
-- claims is one call, where triggers per row made 30, each with statements of its own (a
-- fifth to a third of the server's CPU per job along complete_and_claim, benchmarks.md
-- "Attempt history"). A job's row is updated at most once per statement, so job_id pairs
-- an old row with its new one.
CREATE FUNCTION {schema}.tenure_jobs_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
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
    -- The trim keeps the newest 99 rows the job had, beside the one started here (the
    -- parts of a statement do not see each other's rows).
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
    ),
    started AS (
        INSERT INTO {schema}.tenure_attempts (job_id, generation, owner, started_at)
        SELECT c.job_id, c.generation, c.owner, c.updated_at
        FROM changed AS c
        WHERE c.state = 'leased' AND c.generation <> c.old_generation
    )
    -- More than 100 attempts only if one is 100 generations old (generations are
    -- distinct): an arithmetic test, then one index probe, spares nearly every claim the
    -- trim's sort (without it the history cost a quarter of a claim -> complete cycle,
    -- benchmarks/attempts_cost.py).
    DELETE FROM {schema}.tenure_attempts AS t
    USING changed AS c
    WHERE c.state = 'leased' AND c.generation <> c.old_generation
      AND c.generation > 100
      AND EXISTS (SELECT FROM {schema}.tenure_attempts AS o
                  WHERE o.job_id = c.job_id AND o.generation <= c.generation - 100)
      AND t.job_id = c.job_id
      AND t.generation <= (SELECT o.generation FROM {schema}.tenure_attempts AS o
                           WHERE o.job_id = c.job_id
                           ORDER BY o.generation DESC OFFSET 99 LIMIT 1);
    PERFORM pg_notify('tenure_end_' || TG_TABLE_SCHEMA, n.job_id)
    FROM tenure_old AS o
    JOIN tenure_new AS n USING (job_id)
    WHERE n.state NOT IN ('ready', 'leased') AND o.state <> n.state
      AND EXISTS (SELECT FROM {schema}.tenure_waiters AS w WHERE w.job_id = n.job_id);
    RETURN NULL;
END
$$;

-- A trigger with transition tables cannot name columns: every UPDATE runs it.
CREATE TRIGGER tenure_jobs_updated
    AFTER UPDATE ON {schema}.tenure_jobs
    REFERENCING OLD TABLE AS tenure_old NEW TABLE AS tenure_new
    FOR EACH STATEMENT
    EXECUTE FUNCTION {schema}.tenure_jobs_updated();
