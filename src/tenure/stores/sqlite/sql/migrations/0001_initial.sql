-- tenure schema, version 1.
CREATE TABLE tenure_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Store time never runs backwards: every write reads max(host clock, floor) and raises
-- the floor to it, inside the same transaction.
CREATE TABLE tenure_clock (
    id    INTEGER PRIMARY KEY CHECK (id = 0),
    floor REAL NOT NULL
);
INSERT INTO tenure_clock (id, floor) VALUES (0, 0.0);

CREATE TABLE tenure_jobs (
    seq          INTEGER PRIMARY KEY,  -- submission order, the FIFO tie-break
    job_id       TEXT NOT NULL UNIQUE,
    queue        TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('ready', 'leased', 'done', 'dead')),
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

-- claim_next walks this index from its start: the pick is O(log n) whatever the backlog.
CREATE INDEX tenure_jobs_claimable
    ON tenure_jobs (queue, available_at, seq)
    WHERE state IN ('ready', 'leased');

CREATE INDEX tenure_jobs_listing ON tenure_jobs (queue, state, seq);
CREATE INDEX tenure_jobs_by_state ON tenure_jobs (state, seq);
