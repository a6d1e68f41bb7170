-- Store time now, and when the next job of these queues becomes claimable (NULL: none pending).
{include:_read_clock}
SELECT clock.now, (
    SELECT min(due.available_at)
    FROM unnest(%(queues)b::text[]) AS q (queue)
    -- Queue limits (issue #18): a limited queue with no room falls due when its first
    -- running lease ends, not when a job is due (no claim could take it before).
    CROSS JOIN LATERAL (
        SELECT EXISTS (
            SELECT FROM {schema}.tenure_queues AS l
            WHERE l.queue = q.queue
              AND l.max_leased <= (SELECT count(*) FROM {schema}.tenure_jobs AS r
                                   WHERE r.queue = q.queue
                                     AND r.state IN ('ready', 'leased')
                                     AND r.available_at > clock.now
                                     AND r.state = 'leased')
        ) AS full
    ) AS f
    CROSS JOIN LATERAL (
        SELECT j.available_at
        FROM {schema}.tenure_jobs AS j
        WHERE j.queue = q.queue
          AND j.state IN ('ready', 'leased')
          AND j.generation < %(max_generation)s::bigint
          AND (NOT f.full OR (j.state = 'leased' AND j.available_at > clock.now))
        ORDER BY j.available_at
        LIMIT 1
    ) AS due
    WHERE NOT EXISTS (SELECT FROM {schema}.tenure_queues AS p
                      WHERE p.queue = q.queue AND p.paused)
) AS due
FROM clock
