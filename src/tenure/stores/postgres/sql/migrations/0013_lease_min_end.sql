-- tenure schema, version 13 (issue #19): the expired-lease path of a claim reads only the
-- leases that may have ended. It walked every lease held in the queue (tenure_jobs_leased
-- had no lease time in its key, so that renewals stay HOT) and read each one's row to see
-- whether it had run out: with 4 processes of 10 jobs each, about 8 index entries and 4
-- rows a job, for leases that almost never had.
--
-- lease_min_end: the earliest end the job's current lease was ever given. A claim sets it
-- to the lease's end; a renewal lowers it only when its new end is sooner (a shorter TTL),
-- so an ordinary renewal writes the value it had and stays HOT. A lease cannot have run out
-- before it, so the claim's walk of tenure_jobs_leased stops at the first lease whose
-- lease_min_end is still ahead of store time. Meaningful while the job is leased (the
-- index holds leased jobs only); left as it was when the lease ends.
ALTER TABLE {schema}.tenure_jobs ADD COLUMN lease_min_end double precision;
-- The leases held now: their end as it stands is a lower bound of every later one.
UPDATE {schema}.tenure_jobs SET lease_min_end = available_at WHERE state = 'leased';
-- A leased job without it would never be found expired by a claim's pick (NULL is past
-- every time in the index's order): a writer that forgets it fails here instead.
ALTER TABLE {schema}.tenure_jobs ADD CONSTRAINT tenure_jobs_lease_min_end_check
    CHECK (state <> 'leased' OR lease_min_end IS NOT NULL);
DROP INDEX {schema}.tenure_jobs_leased;
CREATE INDEX tenure_jobs_leased
    ON {schema}.tenure_jobs (queue, lease_min_end)
    WHERE state = 'leased' AND seq > 0;
