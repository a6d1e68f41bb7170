-- tenure schema, version 11: fleet-wide queue rates (issue #18). A queue with
-- rate_per_second set starts at most that many leases a second, across every client: a
-- token bucket of at most rate_burst tokens, refilled at rate_per_second tokens a second
-- by the store's clock; rate_tokens is what it held at store time rate_at (-infinity: the
-- bucket is full, as a rate just set starts). claim_next, claim_many, complete_and_claim
-- and claim of a named job take at most its whole tokens and spend one per lease granted,
-- in the claim's own statement (_queue_room.sql). NULL: no rate. Nullable columns without
-- a default: only the catalog changes, no table rewrite.
ALTER TABLE {schema}.tenure_queues
    ADD COLUMN rate_per_second double precision CHECK (rate_per_second > 0),
    ADD COLUMN rate_burst integer CHECK (rate_burst >= 1),
    ADD COLUMN rate_tokens double precision,
    ADD COLUMN rate_at double precision;

-- The room function learns the rates (and answers the bucket's tokens too): a new result
-- type, so it is dropped and created again.
DROP FUNCTION {schema}.tenure_queue_room(text[], double precision, double precision, text[]);

-- The room of the limited and rate-limited queues among p_queues (see _queue_room.sql):
-- for each queue with a max_leased or a rate_per_second, how many more of its jobs the
-- claim may lease at now: max_leased minus its leases running at now (the jobs of
-- p_settled not counted), and the whole tokens its bucket holds at now, the smaller of
-- the two, never below 0; that now, the time the claim's leases of the queue start; and
-- the bucket's tokens at now (NULL without a rate), which the claim debits by the leases
-- it grants (_claim_next_ctes.sql's "spent"). Two statements, on purpose: the first locks
-- the queues' rows (in name order, so claims asking several limited queues cannot
-- deadlock); the second counts in a snapshot of its own, taken after the lock was granted
-- (a VOLATILE function takes one per statement under READ COMMITTED), so it reads the
-- bucket as the claim before it left it. PL/pgSQL rather than SQL: its plans are kept
-- across calls. Counted in the statement's snapshot instead, the count would miss the
-- leases of a claim it waited for. The time is read after that snapshot too (the server's
-- clock, or p_now when the test hook gives the time, p_test_now): the statement's own time
-- was read before its wait, and a lease ended meanwhile would look running to the store's
-- history at the start of the new one. The count walks the queue's leases in
-- tenure_jobs_leased (as many as are held, not the backlog). The bucket refills at
-- rate_per_second from rate_at (-infinity: full), up to rate_burst; a token due within
-- 1e-5 s counts as there, forgiving the rounding of store times (doubles of epoch seconds
-- step by 2.4e-7 s), so a wait that ends when the next token is due (next_due.sql) finds it.
CREATE FUNCTION {schema}.tenure_queue_room(
    p_queues text[], p_now double precision, p_test_now double precision, p_settled text[]
) RETURNS TABLE (queue text, room bigint, now double precision, tokens double precision)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    PERFORM FROM {schema}.tenure_queues AS q
    WHERE q.queue = ANY (p_queues)
      AND (q.max_leased IS NOT NULL OR q.rate_per_second IS NOT NULL)
    ORDER BY q.queue
    FOR NO KEY UPDATE;
    -- The time is read inside this query, so after its snapshot: a lease settled before
    -- the snapshot (and so not counted) ended at a time read before its commit, before it.
    RETURN QUERY
    SELECT b.queue,
           greatest(least(b.places, floor(b.tokens + 1e-5 * b.rate)::bigint), 0)::bigint,
           b.now, b.tokens
    FROM (
        SELECT q.queue, t.now,
               CASE WHEN q.max_leased IS NOT NULL THEN q.max_leased - (
                   SELECT count(*) FROM {schema}.tenure_jobs AS j
                   WHERE j.queue = q.queue
                     AND j.state = 'leased'
                     AND j.seq > 0  -- the predicate of tenure_jobs_leased (schema.sql says why)
                     AND j.lease_until > t.now
                     AND j.job_id <> ALL (p_settled)
               ) END AS places,
               q.rate_per_second AS rate,
               least(q.rate_burst::float8,
                     q.rate_tokens + greatest(t.now - q.rate_at, 0) * q.rate_per_second)
                   AS tokens
        FROM (SELECT CASE WHEN p_test_now IS NULL
                          THEN greatest(p_now, extract(epoch FROM clock_timestamp())::float8)
                          ELSE p_now END AS now) AS t
        CROSS JOIN {schema}.tenure_queues AS q
        WHERE q.queue = ANY (p_queues)
          AND (q.max_leased IS NOT NULL OR q.rate_per_second IS NOT NULL)
    ) AS b;
END
$$;
