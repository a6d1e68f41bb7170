-- tenure schema, version 9: fleet-wide queue limits (issue #18). A queue with max_leased
-- set has at most that many running leases at once, across every client: claim_next,
-- claim_many, complete_and_claim and claim of a named job take its jobs only while fewer
-- are leased (_queue_room.sql). NULL: no limit.
ALTER TABLE {schema}.tenure_queues ADD COLUMN max_leased integer CHECK (max_leased >= 1);

-- The room of the limited queues among p_queues (see _queue_room.sql): for each queue
-- with a max_leased, max_leased minus its leases running at now, never below 0, the jobs
-- of p_settled not counted; and that now, the time the claim's leases of the queue start.
-- Two statements, on purpose: the first locks the queues' rows (in name order, so claims
-- asking several limited queues cannot deadlock); the second counts in a snapshot of its
-- own, taken after the lock was granted (a VOLATILE function takes one per statement under
-- READ COMMITTED). PL/pgSQL rather than SQL: its plans are kept across calls. Counted in the statement's snapshot instead, the count would miss
-- the leases of a claim it waited for. The time is read after that snapshot too (the
-- server's clock, or p_now when the test hook gives the time, p_test_now): the statement's
-- own time was read before its wait, and a lease ended meanwhile would look running to the
-- store's history at the start of the new one. The count walks the queue's leases in
-- tenure_jobs_leased (as many as are held, not the backlog).
CREATE FUNCTION {schema}.tenure_queue_room(
    p_queues text[], p_now double precision, p_test_now double precision, p_settled text[]
) RETURNS TABLE (queue text, room bigint, now double precision)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    PERFORM FROM {schema}.tenure_queues AS q
    WHERE q.queue = ANY (p_queues) AND q.max_leased IS NOT NULL
    ORDER BY q.queue
    FOR NO KEY UPDATE;
    -- The time is read inside this query, so after its snapshot: a lease settled before
    -- the snapshot (and so not counted) ended at a time read before its commit, before it.
    RETURN QUERY
    SELECT q.queue, greatest(q.max_leased - (
        SELECT count(*) FROM {schema}.tenure_jobs AS j
        WHERE j.queue = q.queue
          AND j.state = 'leased'
          AND j.seq > 0  -- the predicate of tenure_jobs_leased (schema.sql says why)
          AND j.lease_until > t.now
          AND j.job_id <> ALL (p_settled)
    ), 0), t.now
    FROM (SELECT CASE WHEN p_test_now IS NULL
                      THEN greatest(p_now, extract(epoch FROM clock_timestamp())::float8)
                      ELSE p_now END AS now) AS t
    CROSS JOIN {schema}.tenure_queues AS q
    WHERE q.queue = ANY (p_queues) AND q.max_leased IS NOT NULL;
END
$$;
