-- tenure schema, version 8 (issue #18): job priorities and a per-job timeout, and claim
-- indexes that keep renewals HOT.
--
-- Claims take the highest priority first, then the oldest by (available_at, seq). A job of
-- an older schema has priority 0 and no timeout of its own (its handler's applies).
ALTER TABLE {schema}.tenure_jobs ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE {schema}.tenure_jobs ADD COLUMN timeout double precision CHECK (timeout > 0);
-- Why two generated columns. A renewal writes lease_until, available_at and updated_at; a
-- HOT update (no new index entries, the old version pruned in place) is only possible when
-- no indexed column changes value, so no index may hold those three. The claim pick needs a
-- ready job's run time in its index, and purge a finished job's end time: these columns
-- hold them only while they mean that (NULL otherwise), so a renewal, which only runs on a
-- leased job, leaves both NULL, unchanged. Stored, so every writer (SQL of the user's own
-- too) keeps them right without a trigger. Adding them rewrites the table once.
ALTER TABLE {schema}.tenure_jobs ADD COLUMN run_at double precision
    GENERATED ALWAYS AS (CASE WHEN state = 'ready' THEN available_at END) STORED;
ALTER TABLE {schema}.tenure_jobs ADD COLUMN finished_at double precision
    GENERATED ALWAYS AS (CASE WHEN state IN ('done', 'dead', 'cancelled') THEN updated_at END)
    STORED;
-- Room on each page for the new version of a renewed row, so that the update can be HOT
-- (it must stay on its page). Pages written from now on keep 15 % free.
ALTER TABLE {schema}.tenure_jobs SET (fillfactor = 85);

-- tenure_jobs_claimable (queue, available_at, seq) held available_at, which claims and
-- renewals change: neither could be HOT. The pick now has two paths (_claim_next_ctes.sql).
DROP INDEX {schema}.tenure_jobs_claimable;
-- Ready jobs by (queue, priority DESC, run_at, seq): the pick walks a queue's range from
-- its start, highest priority first. A claim moves its job out (state changes, so a claim
-- cannot be HOT: taking a job out of the ready set is what it does); a renewal never
-- touches a column here.
CREATE INDEX tenure_jobs_queued
    ON {schema}.tenure_jobs (queue, priority DESC, run_at, seq)
    WHERE state = 'ready';
-- Leased jobs by queue: the expired-lease path walks the leases held in a queue, bounded by
-- how many jobs are held at once, not by the backlog. No lease time in the key: a renewal
-- changes none of queue, priority, seq or state. "seq > 0" is always true (seq counts from
-- 1); only statements that say it too can use the index: a renew or complete of one job
-- (state = 'leased' and its id) would otherwise take it in a generic plan made while few
-- leases were held, and scan every lease once many are.
CREATE INDEX tenure_jobs_leased
    ON {schema}.tenure_jobs (queue, priority DESC, seq)
    WHERE state = 'leased' AND seq > 0;
-- purge's walk, oldest finished first: keyed on finished_at, which renewals leave NULL
-- (the old key, updated_at, changed on every renewal).
DROP INDEX {schema}.tenure_jobs_finished;
CREATE INDEX tenure_jobs_finished
    ON {schema}.tenure_jobs (finished_at)
    WHERE state IN ('done', 'dead', 'cancelled');
