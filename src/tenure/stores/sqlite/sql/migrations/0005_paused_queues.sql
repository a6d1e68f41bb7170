-- tenure schema, version 5 (issue #18): paused queues. A queue is paused while its row here
-- says so; claim_next and complete_and_claim leave its jobs alone (pick.sql, a primary-key
-- probe per queue asked), claim of a named job still takes it, and leases already held go
-- on. No row: not paused.
CREATE TABLE tenure_queues (
    queue  TEXT PRIMARY KEY,
    paused INTEGER NOT NULL CHECK (paused IN (0, 1))
) WITHOUT ROWID;
