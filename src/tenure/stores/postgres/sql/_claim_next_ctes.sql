-- The CTEs of a batch claim (included by claim_next.sql and complete_and_claim.sql, after
-- "clock"): pick up to %(limit)s claimable jobs of %(queues)b, the highest priority first,
-- then the oldest by (available_at, seq); lease them to %(owner)s ("claimed"; the i-th in
-- that order gets the i-th of %(secret_hashes)b), and bury those whose expired lease was
-- their last allowed attempt ("buried"). Both return answer rows: status, the job's
-- columns, store time, raced (false), position.
--
-- Issue #18, priorities: the pick has two paths per queue, merged in claim order.
--   * ready: walks tenure_jobs_queued (queue, priority DESC, run_at, seq) from the queue's
--     start, O(log n) whatever the backlog. run_at is a ready job's available_at (a
--     generated column, NULL otherwise): the index holds no column a renewal writes.
--   * expired leases: walks tenure_jobs_leased (queue, lease_min_end) up to store time:
--     only the leases that may have run out (migration 0013), sorted here. The lease's end
--     is not in that index on purpose: renewals change it, and an index on it would make
--     every renewal a non-HOT update (tests/postgres/test_hot.py measures the ratio);
--     lease_min_end changes only when a renewal shortens a lease.
-- Each path takes at most %(limit)s rows, so the merge sees every row that can be among
-- the first %(limit)s. Both skip rows other workers are locking right now (SKIP
-- LOCKED), so workers never queue behind each other. A paused queue is left out before
-- either walk: a condition on q alone (one primary-key probe of the small tenure_queues).
-- Each path is a CTE of its own (PostgreSQL locks rows in neither branch of a UNION).
-- Fleet-wide queue limits (issue #18): "room" (_queue_room.sql) says how many more jobs
-- each limited queue may lease; the ready path's walk of such a queue stops there, and the
-- merge keeps no more than the room of the two paths together, and no row to bury met
-- after the room ran out. The including statement
-- defines "settled" (the jobs it completes first) before this.
{include:_queue_room},
ready_picked AS MATERIALIZED (
    SELECT c.job_id, q.queue, c.priority, c.available_at, c.seq, false AS buryable, c.row_id
    FROM unnest(%(queues)b::text[]) AS q (queue)
    CROSS JOIN LATERAL (
        SELECT j.job_id, j.priority, j.available_at, j.seq, j.ctid AS row_id
        FROM {schema}.tenure_jobs AS j
        WHERE j.queue = q.queue
          AND j.state = 'ready'
          AND j.run_at <= (SELECT now FROM clock)
          AND j.generation < %(max_generation)s::bigint
        ORDER BY j.priority DESC, j.run_at, j.seq
        -- Queue limits: no more than the queue's room (no row in "room": unlimited).
        LIMIT least(%(limit)s, coalesce((SELECT r.room FROM room AS r WHERE r.queue = q.queue),
                                       %(limit)s))
        FOR NO KEY UPDATE SKIP LOCKED
    ) AS c
    WHERE NOT EXISTS (SELECT FROM {schema}.tenure_queues AS p
                      WHERE p.queue = q.queue AND p.paused)
    ORDER BY c.priority DESC, c.available_at, c.seq
    LIMIT %(limit)s
),
expired_picked AS MATERIALIZED (
    SELECT c.job_id, q.queue, c.priority, c.available_at, c.seq,
           c.attempts >= c.max_attempts AS buryable, c.row_id
    FROM unnest(%(queues)b::text[]) AS q (queue)
    CROSS JOIN LATERAL (
        SELECT j.job_id, j.priority, j.available_at, j.seq, j.attempts, j.max_attempts,
               j.ctid AS row_id
        FROM {schema}.tenure_jobs AS j
        WHERE j.queue = q.queue
          AND j.state = 'leased'
          AND j.lease_min_end IS NOT NULL  -- the predicate of tenure_jobs_leased (schema.sql says why)
          -- Only the leases that may have run out (no lease ends before its lease_min_end):
          -- the index range stops at the first still ahead.
          AND j.lease_min_end <= (SELECT now FROM clock)
          AND j.available_at <= (SELECT now FROM clock)
          AND j.generation < %(max_generation)s::bigint
        ORDER BY j.priority DESC, j.available_at, j.seq
        -- Not cut at a limited queue's room: an expired lease on its last attempt is buried
        -- and takes none, so the merge decides (a full queue's walk buries nothing).
        LIMIT %(limit)s
        FOR NO KEY UPDATE SKIP LOCKED
    ) AS c
    WHERE NOT EXISTS (SELECT FROM {schema}.tenure_queues AS p
                      WHERE p.queue = q.queue AND p.paused)
    ORDER BY c.priority DESC, c.available_at, c.seq
    LIMIT %(limit)s
),
-- The merge, in claim order. (Rows a path locked that the merge leaves out stay locked
-- until this statement's transaction ends: other claims skip them meanwhile, as they skip
-- any row a claim is locking.)
picked AS MATERIALIZED (
    SELECT u.job_id, u.queue, u.priority, u.available_at, u.seq, u.buryable, u.row_id
    FROM (
        SELECT b.*,
               row_number() OVER (PARTITION BY b.queue, b.buryable
                                  ORDER BY b.priority DESC, b.available_at, b.seq) AS in_queue,
               count(*) FILTER (WHERE NOT b.buryable)
                   OVER (PARTITION BY b.queue ORDER BY b.priority DESC, b.available_at, b.seq
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS leased_before
        FROM (SELECT * FROM ready_picked UNION ALL SELECT * FROM expired_picked) AS b
    ) AS u
    LEFT JOIN room AS r ON r.queue = u.queue
    -- Queue limits: the two paths together lease no more than the queue's room; a row to
    -- bury takes none, and is reached only while the room lasts, as a walk of the queue in
    -- claim order that stops once it is full (what the other stores do).
    WHERE r.room IS NULL
       OR (u.buryable AND u.leased_before < r.room)
       OR (NOT u.buryable AND u.in_queue <= r.room)
    ORDER BY u.priority DESC, u.available_at, u.seq
    LIMIT %(limit)s
),
numbered AS (
    SELECT p.job_id, p.queue, p.row_id,
           row_number() OVER (ORDER BY p.priority DESC, p.available_at, p.seq) AS position
    FROM picked AS p
    WHERE NOT p.buryable
),
claimed AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'leased',
        owner = %(owner)s,
        -- Above the job's generation and the floor, at least the timeline's base, never past
        -- the next timeline's base (_next_generation.sql): never a reissue, even after a promotion.
        generation = {include:_next_generation},
        secret_hash = (%(secret_hashes)b::text[])[n.position],
        -- A limited queue's leases start at its room's time (read after its lock, see
        -- tenure_queue_room), the others at the statement's.
        lease_until = coalesce(r.now, clock.now) + %(ttl)s::float8,
        available_at = coalesce(r.now, clock.now) + %(ttl)s::float8,
        lease_min_end = coalesce(r.now, clock.now) + %(ttl)s::float8,
        attempts = j.attempts + 1,
        updated_at = coalesce(r.now, clock.now)
    FROM numbered AS n
    LEFT JOIN room AS r ON r.queue = n.queue,
        clock
    -- Each picked row by its address, as the batch updates of _held.sql reach theirs, and
    -- for the same reason. (A row a concurrent writer changed after this statement's
    -- snapshot, and that the pick's lock found still claimable as it is now, is not at an
    -- address the snapshot sees: it is left for the next claim.)
    WHERE j.ctid = n.row_id
      AND j.attempts < j.max_attempts
    RETURNING 'applied' AS status, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now, false AS raced, n.position
),
-- Fleet-wide queue rates: each rate-limited queue's bucket gives up one token per lease
-- granted here (a job buried takes none), from its tokens at the room's time. Its row is
-- locked by tenure_queue_room until the transaction ends, so no claim reads the bucket
-- between the room and this debit. Written only when the claim leased some of its jobs.
spent AS (
    UPDATE {schema}.tenure_queues AS q
    SET rate_tokens = r.tokens - (SELECT count(*) FROM claimed AS c WHERE c.queue = r.queue),
        rate_at = greatest(q.rate_at, r.now)
    FROM room AS r
    WHERE q.queue = r.queue
      AND r.tokens IS NOT NULL
      AND EXISTS (SELECT FROM claimed AS c WHERE c.queue = r.queue)
),
buried AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'dead',
        secret_hash = NULL,
        lease_until = NULL,
        error = coalesce(j.error, 'lease expired during the last allowed attempt'),
        updated_at = clock.now
    FROM picked AS p, clock
    WHERE j.ctid = p.row_id AND p.buryable  -- as above
    RETURNING 'buried' AS status, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now, false AS raced, NULL::bigint AS position
)
