-- Store time now, and when the next job of these queues becomes claimable (NULL: none pending).
-- Per queue, the earliest of: a ready job's run time and a lease's end. tenure_jobs_queued
-- leads with the priority (the claim's order), so the earliest run time is looked up per
-- priority present in the queue, stepping from one priority to the next below it (a
-- recursive loose index scan: O(log n) per priority level, not a walk of the backlog);
-- the leases are walked through tenure_jobs_leased (as many as are held).
{include:_read_clock}
SELECT clock.now, (
    SELECT min(CASE WHEN due.at IS NOT NULL THEN greatest(due.at, f.token) END)
    FROM unnest(%(queues)b::text[]) AS q (queue)
    -- Queue limits (issue #18): a limited queue with no room falls due when its first
    -- running lease ends, not when a job is due (no claim could take it before). Queue
    -- rates (migration 0011): a rate-limited queue without a whole token falls due no
    -- sooner than its next token ("token"), when rate_tokens reaches 1.
    CROSS JOIN LATERAL (
        SELECT (SELECT b.rate_at + (1 - b.rate_tokens) / b.rate_per_second
                FROM {schema}.tenure_queues AS b
                WHERE b.queue = q.queue AND b.rate_per_second IS NOT NULL
                  AND b.rate_tokens
                      + (greatest(clock.now - b.rate_at, 0) + 1e-5) * b.rate_per_second
                      < 1) AS token,
               EXISTS (
            SELECT FROM {schema}.tenure_queues AS l
            WHERE l.queue = q.queue
              AND l.max_leased <= (SELECT count(*) FROM {schema}.tenure_jobs AS r
                                   WHERE r.queue = q.queue
                                     AND r.state = 'leased' AND r.lease_min_end IS NOT NULL  -- tenure_jobs_leased
                                     AND r.available_at > clock.now)
        ) AS full
    ) AS f
    CROSS JOIN LATERAL (
        WITH RECURSIVE levels (priority) AS (
            (SELECT j.priority FROM {schema}.tenure_jobs AS j
             WHERE j.queue = q.queue AND j.state = 'ready'
             ORDER BY j.priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT j.priority FROM {schema}.tenure_jobs AS j
                    WHERE j.queue = q.queue AND j.state = 'ready' AND j.priority < l.priority
                    ORDER BY j.priority DESC LIMIT 1)
            FROM levels AS l
            WHERE l.priority IS NOT NULL
        )
        SELECT (SELECT j.run_at FROM {schema}.tenure_jobs AS j
                WHERE j.queue = q.queue AND j.state = 'ready' AND j.priority = l.priority
                  AND j.generation < %(max_generation)s::bigint
                ORDER BY j.priority DESC, j.run_at LIMIT 1) AS at
        FROM levels AS l
        WHERE l.priority IS NOT NULL AND NOT f.full
        UNION ALL
        SELECT min(j.available_at)
        FROM {schema}.tenure_jobs AS j
        WHERE j.queue = q.queue AND j.state = 'leased' AND j.lease_min_end IS NOT NULL  -- tenure_jobs_leased
          AND j.generation < %(max_generation)s::bigint
          AND (NOT f.full OR j.available_at > clock.now)
    ) AS due
    WHERE NOT EXISTS (SELECT FROM {schema}.tenure_queues AS p
                      WHERE p.queue = q.queue AND p.paused)
) AS due
FROM clock
