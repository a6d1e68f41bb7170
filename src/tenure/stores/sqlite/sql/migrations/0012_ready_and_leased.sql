-- tenure schema, version 12 (issue #18): the claim index splits by state, so that a claim
-- no longer steps over the running leases. tenure_jobs_claimable held the ready jobs and
-- the leased ones in one order, (queue, priority DESC, available_at, seq); a leased job's
-- available_at is its lease's end, so once the jobs of the top priorities were all held,
-- every pick walked their leases before it reached the best ready job (about 0.2 us per
-- lease; docs/benchmarks.md, "Priorities"). Now the ready jobs have the claim order to
-- themselves, and the leased ones are ordered by when their leases end, so the pick
-- (pick.sql) reads the best ready job and the leases already expired, nothing else.
DROP INDEX tenure_jobs_claimable;
CREATE INDEX tenure_jobs_ready
    ON tenure_jobs (queue, priority DESC, available_at, seq)
    WHERE state = 'ready';
CREATE INDEX tenure_jobs_leased
    ON tenure_jobs (queue, available_at)
    WHERE state = 'leased';
