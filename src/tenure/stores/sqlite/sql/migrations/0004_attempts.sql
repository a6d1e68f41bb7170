-- tenure schema, version 4 (issue #17): the attempt history. Each claim of a job starts an
-- attempt (its generation, owner and store time); the end of that lease ends it. Written by
-- triggers on tenure_jobs, so an attempt changes in the very statement that changes its
-- job, whatever runs it (the driver, a caller's transaction, claim_next's loop), at the
-- store time that statement wrote (updated_at).
CREATE TABLE tenure_attempts (
    job_id     TEXT NOT NULL,
    generation INTEGER NOT NULL,
    owner      TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at   REAL,
    ending     TEXT
        CHECK (ending IN ('completed', 'failed', 'released', 'cancelled', 'lost', 'dead')),
    error      TEXT,
    PRIMARY KEY (job_id, generation)
) WITHOUT ROWID;

-- A lease ends: the job leaves the leased state, or a claim takes it at a newer generation
-- after it expired (lost). How it ended follows from the update: done is completed;
-- cancelled; dead with its secret hash cleared is a burial (bury.sql), otherwise a fail;
-- ready with the attempt refunded is a release, otherwise a fail.
CREATE TRIGGER tenure_attempt_ended
AFTER UPDATE OF state, generation ON tenure_jobs
FOR EACH ROW WHEN OLD.state = 'leased'
    AND (NEW.state <> 'leased' OR NEW.generation <> OLD.generation)
BEGIN
    UPDATE tenure_attempts
    SET ended_at = NEW.updated_at,
        ending = CASE
            WHEN NEW.state = 'leased' THEN 'lost'
            WHEN NEW.state = 'done' THEN 'completed'
            WHEN NEW.state = 'cancelled' THEN 'cancelled'
            WHEN NEW.state = 'dead' AND NEW.secret_hash IS NULL THEN 'dead'
            WHEN NEW.state = 'ready' AND NEW.attempts < OLD.attempts THEN 'released'
            ELSE 'failed' END,
        error = CASE WHEN NEW.state IN ('cancelled', 'ready', 'dead')
                      AND NOT (NEW.state = 'ready' AND NEW.attempts < OLD.attempts)
                     THEN NEW.error END
    WHERE job_id = OLD.job_id AND generation = OLD.generation AND ended_at IS NULL;
END;

-- A claim starts an attempt, and drops the oldest beyond the newest 100 of the job
-- (tenure.models.ATTEMPTS_KEPT): a job retried forever keeps a bounded history.
CREATE TRIGGER tenure_attempt_started
AFTER UPDATE OF generation ON tenure_jobs
FOR EACH ROW WHEN NEW.state = 'leased' AND NEW.generation <> OLD.generation
BEGIN
    INSERT INTO tenure_attempts (job_id, generation, owner, started_at)
    VALUES (NEW.job_id, NEW.generation, NEW.owner, NEW.updated_at);
    -- More than 100 attempts only if one is 100 generations old (generations are
    -- distinct): nearly every claim skips the trim's walk of the job's history.
    DELETE FROM tenure_attempts
    WHERE NEW.generation > 100
      AND job_id = NEW.job_id
      AND EXISTS (SELECT 1 FROM tenure_attempts
                  WHERE job_id = NEW.job_id AND generation <= NEW.generation - 100)
      AND generation <= (SELECT generation FROM tenure_attempts WHERE job_id = NEW.job_id
                         ORDER BY generation DESC LIMIT 1 OFFSET 100);
END;

-- delete and purge take the history with the job.
CREATE TRIGGER tenure_attempts_deleted
AFTER DELETE ON tenure_jobs
FOR EACH ROW
BEGIN
    DELETE FROM tenure_attempts WHERE job_id = OLD.job_id;
END;
