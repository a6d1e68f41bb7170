-- tenure schema, version 4 (issue #17): the attempt history. Each claim of a job starts an
-- attempt (its generation, owner and store time); the end of that lease ends it. The lease
-- in progress is the job's own row (owner, generation, and claimed_at, which claim.sql
-- sets): tenure_attempts gets a row only when a lease ends, written by a trigger on
-- tenure_jobs in the very statement that ends it, whatever runs it (the driver, a caller's
-- transaction, claim_next's loop), at the store time that statement wrote (updated_at).
-- So a claim's transaction writes no page it did not write before, and a settle's one more
-- (the attempts table's): the history's cost, benchmarks/attempts_cost.py.
ALTER TABLE tenure_jobs ADD COLUMN claimed_at REAL;

CREATE TABLE tenure_attempts (
    job_id     TEXT NOT NULL,
    generation INTEGER NOT NULL,
    owner      TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at   REAL NOT NULL,
    ending     TEXT NOT NULL
        CHECK (ending IN ('completed', 'failed', 'released', 'cancelled', 'lost', 'dead')),
    error      TEXT,
    PRIMARY KEY (job_id, generation)
) WITHOUT ROWID;

-- A lease ends: the job leaves the leased state, or a claim takes it at a newer generation
-- after it expired (lost). How it ended follows from the update: done is completed;
-- cancelled; dead with its secret hash cleared is a burial (bury.sql), otherwise a fail;
-- ready with the attempt refunded is a release, otherwise a fail. Then the oldest beyond
-- the newest 100 of the job go (tenure.models.ATTEMPTS_KEPT): more than 100 only if one is
-- 100 generations old (generations are distinct), so nearly every end skips the trim.
CREATE TRIGGER tenure_attempt_ended
AFTER UPDATE OF state, generation ON tenure_jobs
FOR EACH ROW WHEN OLD.state = 'leased'
    AND (NEW.state <> 'leased' OR NEW.generation <> OLD.generation)
BEGIN
    INSERT OR REPLACE INTO tenure_attempts
        (job_id, generation, owner, started_at, ended_at, ending, error)
    VALUES (
        OLD.job_id, OLD.generation, OLD.owner, coalesce(OLD.claimed_at, OLD.updated_at),
        NEW.updated_at,
        CASE
            WHEN NEW.state = 'leased' THEN 'lost'
            WHEN NEW.state = 'done' THEN 'completed'
            WHEN NEW.state = 'cancelled' THEN 'cancelled'
            WHEN NEW.state = 'dead' AND NEW.secret_hash IS NULL THEN 'dead'
            WHEN NEW.state = 'ready' AND NEW.attempts < OLD.attempts THEN 'released'
            ELSE 'failed' END,
        CASE WHEN NEW.state IN ('cancelled', 'ready', 'dead')
              AND NOT (NEW.state = 'ready' AND NEW.attempts < OLD.attempts)
             THEN NEW.error END
    );
    DELETE FROM tenure_attempts
    WHERE OLD.generation > 100
      AND job_id = OLD.job_id
      AND EXISTS (SELECT 1 FROM tenure_attempts
                  WHERE job_id = OLD.job_id AND generation <= OLD.generation - 100)
      AND generation <= (SELECT generation FROM tenure_attempts WHERE job_id = OLD.job_id
                         ORDER BY generation DESC LIMIT 1 OFFSET 100);
END;

-- delete and purge take the history with the job.
CREATE TRIGGER tenure_attempts_deleted
AFTER DELETE ON tenure_jobs
FOR EACH ROW
BEGIN
    DELETE FROM tenure_attempts WHERE job_id = OLD.job_id;
END;
