-- tenure schema, version 7: fleet-wide queue limits (issue #18). A queue with max_leased
-- set has at most that many running leases at once, across every client: claim_next,
-- claim_many, complete_and_claim and claim of a named job take its jobs only while fewer
-- are leased (_queue_room.sql). NULL: no limit.
ALTER TABLE {schema}.tenure_queues ADD COLUMN max_leased integer CHECK (max_leased >= 1);

-- The room of the limited queues among queues (see _queue_room.sql): for each queue of
-- queues with a max_leased, max_leased minus its leases running at now, never below 0,
-- the jobs of settled not counted. Two statements, on purpose: the first locks the
-- queues' rows (in name order, so claims asking several limited queues cannot deadlock);
-- the second counts in a snapshot of its own, taken after the lock was granted (a VOLATILE
-- SQL function takes one per statement under READ COMMITTED). A single statement would
-- count in the snapshot of its start and miss the leases of a claim it waited for. The
-- count walks the queue's part of tenure_jobs_claimable after now: running leases, and
-- ready jobs due later (which it reads and leaves out).
CREATE FUNCTION {schema}.tenure_queue_room(
    p_queues text[], p_now double precision, p_settled text[]
) RETURNS TABLE (queue text, room bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT q.queue FROM {schema}.tenure_queues AS q
    WHERE q.queue = ANY (p_queues) AND q.max_leased IS NOT NULL
    ORDER BY q.queue
    FOR NO KEY UPDATE;
    SELECT q.queue, greatest(q.max_leased - (
        SELECT count(*) FROM {schema}.tenure_jobs AS j
        WHERE j.queue = q.queue
          AND j.state IN ('ready', 'leased')
          AND j.available_at > p_now
          AND j.state = 'leased'
          AND j.lease_until > p_now
          AND j.job_id <> ALL (p_settled)
    ), 0)
    FROM {schema}.tenure_queues AS q
    WHERE q.queue = ANY (p_queues) AND q.max_leased IS NOT NULL
$$;
