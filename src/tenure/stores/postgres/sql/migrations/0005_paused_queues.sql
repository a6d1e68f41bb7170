-- tenure schema, version 5: paused queues (issue #18). A queue is paused while its row here
-- says so; claim_next and complete_and_claim leave its jobs alone (a NOT EXISTS on this
-- small table per queue asked, before the walk of tenure_jobs_claimable), claim of a named
-- job still takes it, and leases already held go on. No row: not paused.
CREATE TABLE {schema}.tenure_queues (
    queue  text COLLATE "C" PRIMARY KEY,
    paused boolean NOT NULL
);
