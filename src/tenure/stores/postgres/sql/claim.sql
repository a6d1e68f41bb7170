-- Claim one job by id when it is free or its lease expired by store time: a new generation
-- and an attempt. An expired lease on the last allowed attempt is buried instead (state
-- dead, secret hash cleared so that the late holder's complete/fail cannot pass for a repeat).
{include:_clock},
-- Fleet-wide queue limits and rates (issue #18): a claim by id respects its queue's limit
-- and rate as claim_next does (_queue_room.sql), the queue being the job's. No row:
-- neither. While no queue of the store has either, nothing but that test runs (a one-time
-- filter).
room AS MATERIALIZED (
    SELECT r.queue, r.room, r.now, r.tokens
    FROM {schema}.tenure_jobs AS t
    CROSS JOIN LATERAL {schema}.tenure_queue_room(
        ARRAY[t.queue], (SELECT now FROM clock), %(now)s::float8, ARRAY[]::text[]
    ) AS r
    WHERE EXISTS (SELECT FROM {schema}.tenure_queues AS a
                  WHERE a.max_leased IS NOT NULL OR a.rate_per_second IS NOT NULL)
      AND t.job_id = %(job_id)s
      AND EXISTS (SELECT FROM {schema}.tenure_queues AS l
                  WHERE l.queue = t.queue
                    AND (l.max_leased IS NOT NULL OR l.rate_per_second IS NOT NULL))
),
-- When the lease starts: the room's time for a limited queue (read after its lock, see
-- tenure_queue_room), else the statement's.
started AS MATERIALIZED (
    SELECT coalesce((SELECT r.now FROM room AS r), c.now) AS now FROM clock AS c
),
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'leased',
        owner = %(owner)s,
        -- Above the job's generation and the floor, at least the timeline's base, never past
        -- the next timeline's base (_next_generation.sql): never a reissue, even after a promotion.
        generation = {include:_next_generation},
        secret_hash = %(secret_hash)s,
        lease_until = s.now + %(ttl)s::float8,
        available_at = s.now + %(ttl)s::float8,
        lease_min_end = s.now + %(ttl)s::float8,
        attempts = j.attempts + 1,
        updated_at = s.now
    FROM clock, started AS s
    WHERE j.job_id = %(job_id)s
      AND j.state IN ('ready', 'leased')
      AND j.available_at <= clock.now
      AND j.attempts < j.max_attempts
      AND j.generation < %(max_generation)s::bigint
      -- Queue limits and rates: not while the queue is full or has no whole token.
      AND NOT EXISTS (SELECT FROM room AS r WHERE r.queue = j.queue AND r.room < 1)
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
),
-- Queue rates: the lease granted takes a token (_claim_next_ctes.sql's "spent").
spent AS (
    UPDATE {schema}.tenure_queues AS q
    SET rate_tokens = r.tokens - 1, rate_at = greatest(q.rate_at, r.now)
    FROM room AS r
    WHERE q.queue = r.queue AND r.tokens IS NOT NULL AND EXISTS (SELECT FROM applied)
),
buried AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'dead',
        secret_hash = NULL,
        lease_until = NULL,
        error = coalesce(j.error, 'lease expired during the last allowed attempt'),
        updated_at = clock.now
    FROM clock
    WHERE j.job_id = %(job_id)s
      AND j.state = 'leased'
      AND j.available_at <= clock.now
      AND j.attempts >= j.max_attempts
      AND NOT EXISTS (SELECT FROM applied)
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
)
SELECT 'applied' AS status, a.*, clock.now, false AS raced FROM applied AS a, clock
UNION ALL
SELECT 'buried', b.*, clock.now, false FROM buried AS b, clock
UNION ALL
-- Not applied: the job as this statement's snapshot saw it. When that version would have
-- matched, a concurrent writer changed the job meanwhile (raced): the driver runs the
-- statement again rather than report a version that is already gone.
SELECT CASE WHEN j.job_id IS NULL THEN 'missing' ELSE 'missed' END, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now,
    coalesce(
        j.state IN ('ready', 'leased')
        AND j.available_at <= clock.now
        AND (
            (j.attempts < j.max_attempts AND j.generation < %(max_generation)s::bigint
             AND NOT EXISTS (SELECT FROM room AS r WHERE r.queue = j.queue AND r.room < 1))
            OR (j.state = 'leased' AND j.attempts >= j.max_attempts)
        ),
        false
    )
FROM clock LEFT JOIN {schema}.tenure_jobs AS j ON j.job_id = %(job_id)s
WHERE NOT EXISTS (SELECT FROM applied) AND NOT EXISTS (SELECT FROM buried)
