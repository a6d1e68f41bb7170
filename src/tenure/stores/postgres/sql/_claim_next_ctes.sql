-- The CTEs of a batch claim (included by claim_next.sql and complete_and_claim.sql, after
-- "clock"): pick up to %(limit)s of the oldest claimable jobs of %(queues)b, lease them to
-- %(owner)s ("claimed"; the i-th, oldest first, gets the i-th of %(secret_hashes)b), and
-- bury those whose expired lease was their last allowed attempt ("buried"). Both return
-- answer rows: status, the job's columns, store time, raced (false), position.
-- Per queue, the pick walks tenure_jobs_claimable from its start (O(log n)) and skips rows
-- other workers are locking right now (SKIP LOCKED), so workers never queue behind each
-- other.
-- Fleet-wide queue limits (issue #18): "room" (_queue_room.sql) says how many more jobs
-- each limited queue may lease; the walk of such a queue stops there (its LIMIT below).
-- The including statement defines "settled" (the jobs it completes first) before this.
{include:_queue_room},
picked AS MATERIALIZED (
    SELECT c.job_id, q.queue, c.available_at, c.seq,
           c.state = 'leased' AND c.attempts >= c.max_attempts AS buryable
    FROM unnest(%(queues)b::text[]) AS q (queue)
    CROSS JOIN LATERAL (
        SELECT j.job_id, j.state, j.attempts, j.max_attempts, j.available_at, j.seq
        FROM {schema}.tenure_jobs AS j
        WHERE j.queue = q.queue
          AND j.state IN ('ready', 'leased')
          AND j.available_at <= (SELECT now FROM clock)
          AND j.generation < %(max_generation)s::bigint
        ORDER BY j.available_at, j.seq
        -- Queue limits: no more than the queue's room (no row in "room": unlimited).
        LIMIT least(%(limit)s, coalesce((SELECT r.room FROM room AS r WHERE r.queue = q.queue),
                                       %(limit)s))
        FOR NO KEY UPDATE SKIP LOCKED
    ) AS c
    -- A paused queue is left out: a condition on q alone, so it filters the queues before
    -- their walk (one primary-key probe of the small tenure_queues each), and the pick
    -- stays on tenure_jobs_claimable.
    WHERE NOT EXISTS (SELECT FROM {schema}.tenure_queues AS p
                      WHERE p.queue = q.queue AND p.paused)
    ORDER BY c.available_at, c.seq
    LIMIT %(limit)s
),
numbered AS (
    SELECT p.job_id, p.queue, row_number() OVER (ORDER BY p.available_at, p.seq) AS position
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
        secret_hash = h.secret_hash,
        -- A limited queue's leases start at its room's time (read after its lock, see
        -- tenure_queue_room), the others at the statement's.
        lease_until = coalesce(r.now, clock.now) + %(ttl)s::float8,
        available_at = coalesce(r.now, clock.now) + %(ttl)s::float8,
        attempts = j.attempts + 1,
        updated_at = coalesce(r.now, clock.now)
    FROM numbered AS n
    JOIN unnest(%(secret_hashes)b::text[]) WITH ORDINALITY AS h (secret_hash, position)
        USING (position)
    LEFT JOIN room AS r ON r.queue = n.queue,
        clock
    WHERE j.job_id = n.job_id
      AND j.attempts < j.max_attempts
    RETURNING 'applied' AS status, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, clock.now, false AS raced, n.position
),
buried AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'dead',
        secret_hash = NULL,
        lease_until = NULL,
        error = coalesce(j.error, 'lease expired during the last allowed attempt'),
        updated_at = clock.now
    FROM picked AS p, clock
    WHERE j.job_id = p.job_id AND p.buryable
    RETURNING 'buried' AS status, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, clock.now, false AS raced, NULL::bigint AS position
)
