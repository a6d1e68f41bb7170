-- tenure schema, version 4: the attempt history (issue #17). Each claim of a job starts an
-- attempt (its generation, owner and store time); the end of that lease ends it. Written by a
-- trigger on tenure_jobs, so an attempt changes in the very statement that changes its job,
-- whatever statement that is (claim, claim_next, complete_and_claim, complete_many, fail,
-- release, cancel, a caller's transaction), at the store time it wrote (updated_at).
-- delete.sql and purge.sql remove a job's history with it, in their statement (a foreign
-- key would do it too, but its check on every claim's insert cost more than the rest of
-- the history).
CREATE TABLE {schema}.tenure_attempts (
    job_id     text COLLATE "C" NOT NULL,
    generation bigint NOT NULL,
    owner      text NOT NULL,
    started_at double precision NOT NULL,
    ended_at   double precision,
    ending     text
        CHECK (ending IN ('completed', 'failed', 'released', 'cancelled', 'lost', 'dead')),
    error      text,
    PRIMARY KEY (job_id, generation)
);

-- A lease ends when its job leaves the leased state, or when a claim takes the job at a
-- newer generation after it expired (lost). How it ended follows from the update: done is
-- completed; cancelled; dead with its secret hash cleared is a burial, otherwise a fail;
-- ready with the attempt refunded is a release, otherwise a fail. A claim starts the next
-- attempt, and drops the oldest beyond the newest 100 of the job (tenure.models.
-- ATTEMPTS_KEPT): a job retried forever keeps a bounded history.
CREATE FUNCTION {schema}.tenure_record_attempt() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    released boolean := NEW.state = 'ready' AND NEW.attempts < OLD.attempts;
BEGIN
    IF OLD.state = 'leased' THEN
        UPDATE {schema}.tenure_attempts AS t
        SET ended_at = NEW.updated_at,
            ending = CASE
                WHEN NEW.state = 'leased' THEN 'lost'
                WHEN NEW.state = 'done' THEN 'completed'
                WHEN NEW.state = 'cancelled' THEN 'cancelled'
                WHEN NEW.state = 'dead' AND NEW.secret_hash IS NULL THEN 'dead'
                WHEN released THEN 'released'
                ELSE 'failed' END,
            error = CASE WHEN NEW.state IN ('cancelled', 'ready', 'dead') AND NOT released
                         THEN NEW.error END
        WHERE t.job_id = OLD.job_id AND t.generation = OLD.generation AND t.ended_at IS NULL;
    END IF;
    IF NEW.state = 'leased' AND NEW.generation <> OLD.generation THEN
        INSERT INTO {schema}.tenure_attempts (job_id, generation, owner, started_at)
        VALUES (NEW.job_id, NEW.generation, NEW.owner, NEW.updated_at);
        -- More than 100 attempts only if one is 100 generations old (generations are
        -- distinct): an arithmetic test, then one index probe, spares nearly every claim
        -- the trim's sort (without it the history cost a quarter of a claim -> complete
        -- cycle, benchmarks/attempts_cost.py).
        IF NEW.generation > 100 AND EXISTS (
            SELECT FROM {schema}.tenure_attempts AS o
            WHERE o.job_id = NEW.job_id AND o.generation <= NEW.generation - 100
        ) THEN
            DELETE FROM {schema}.tenure_attempts AS t
            WHERE t.job_id = NEW.job_id
              AND t.generation <= (SELECT o.generation FROM {schema}.tenure_attempts AS o
                                   WHERE o.job_id = NEW.job_id
                                   ORDER BY o.generation DESC OFFSET 100 LIMIT 1);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tenure_jobs_attempts
    AFTER UPDATE OF state, generation ON {schema}.tenure_jobs
    FOR EACH ROW WHEN ((OLD.state = 'leased' OR NEW.state = 'leased')
                       AND (OLD.state IS DISTINCT FROM NEW.state
                            OR OLD.generation IS DISTINCT FROM NEW.generation))
    EXECUTE FUNCTION {schema}.tenure_record_attempt();
