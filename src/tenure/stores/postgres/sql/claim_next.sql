-- Claim up to %(limit)s of the oldest claimable jobs of some queues in one statement.
-- Per queue, the pick walks tenure_jobs_claimable from its start (O(log n)) and skips rows
-- other workers are locking right now (SKIP LOCKED), so workers never queue behind each
-- other. The i-th claimed job (oldest first) gets the i-th secret hash. Picked jobs whose
-- expired lease was their last allowed attempt are buried instead, and reported as such:
-- the driver then runs the statement again for the leases still wanted.
{include:_clock},
picked AS MATERIALIZED (
    SELECT c.job_id, c.available_at, c.seq,
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
        LIMIT %(limit)s
        FOR NO KEY UPDATE SKIP LOCKED
    ) AS c
    ORDER BY c.available_at, c.seq
    LIMIT %(limit)s
),
numbered AS (
    SELECT p.job_id, row_number() OVER (ORDER BY p.available_at, p.seq) AS position
    FROM picked AS p
    WHERE NOT p.buryable
),
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'leased',
        owner = %(owner)s,
        generation = j.generation + 1,
        secret_hash = h.secret_hash,
        lease_until = clock.now + %(ttl)s::float8,
        available_at = clock.now + %(ttl)s::float8,
        attempts = j.attempts + 1,
        updated_at = clock.now
    FROM numbered AS n
    JOIN unnest(%(secret_hashes)b::text[]) WITH ORDINALITY AS h (secret_hash, position)
        USING (position),
        clock
    WHERE j.job_id = n.job_id
      AND j.attempts < j.max_attempts
    RETURNING n.position, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at
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
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at
)
SELECT 'applied' AS status, a.job_id, a.queue, a.state, a.owner, a.generation, a.secret_hash, a.lease_until, a.available_at, a.attempts, a.max_attempts, a.payload, a.result, a.error, a.created_at, a.updated_at, clock.now, a.position
FROM applied AS a, clock
UNION ALL
SELECT 'buried', b.*, clock.now, NULL FROM buried AS b, clock
ORDER BY position NULLS LAST
