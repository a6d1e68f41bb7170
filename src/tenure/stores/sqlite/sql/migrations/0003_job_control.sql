-- tenure schema, version 3: job control (cancel, requeue, delete, purge).
-- A new final state, cancelled: SQLite cannot change a CHECK in place, so the jobs table is
-- rebuilt (same columns, in the same order) inside the migration's transaction.
CREATE TABLE tenure_jobs_v3 (
    seq          INTEGER PRIMARY KEY,  -- submission order, the FIFO tie-break
    job_id       TEXT NOT NULL UNIQUE,
    queue        TEXT NOT NULL,
    state        TEXT NOT NULL
        CHECK (state IN ('ready', 'leased', 'done', 'dead', 'cancelled')),
    owner        TEXT,
    generation   INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),
    secret_hash  TEXT,
    lease_until  REAL,
    -- When the job can next be claimed: its run time when ready, its lease's end when leased.
    available_at REAL NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    payload      TEXT,
    result       TEXT,
    error        TEXT,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL
);
INSERT INTO tenure_jobs_v3
    (seq, job_id, queue, state, owner, generation, secret_hash, lease_until, available_at,
     attempts, max_attempts, payload, result, error, created_at, updated_at)
SELECT seq, job_id, queue, state, owner, generation, secret_hash, lease_until, available_at,
       attempts, max_attempts, payload, result, error, created_at, updated_at
FROM tenure_jobs;
DROP TABLE tenure_jobs;
ALTER TABLE tenure_jobs_v3 RENAME TO tenure_jobs;

-- claim_next walks this index from its start: the pick is O(log n) whatever the backlog.
CREATE INDEX tenure_jobs_claimable
    ON tenure_jobs (queue, available_at, seq)
    WHERE state IN ('ready', 'leased');
CREATE INDEX tenure_jobs_listing ON tenure_jobs (queue, state, seq);
CREATE INDEX tenure_jobs_by_state ON tenure_jobs (state, seq);
-- purge walks this one, oldest finished job first.
CREATE INDEX tenure_jobs_finished
    ON tenure_jobs (updated_at)
    WHERE state IN ('done', 'dead', 'cancelled');

-- The generation floor: the highest generation of any job deleted or purged. A claim takes
-- max(generation, floor) + 1, so a job id submitted again after its job was deleted never
-- gets a token the deleted job had.
CREATE TABLE tenure_floor (
    id         INTEGER PRIMARY KEY CHECK (id = 0),
    generation INTEGER NOT NULL CHECK (generation >= 0)
);
INSERT INTO tenure_floor (id, generation) VALUES (0, 0);
