-- Store time now, and when the next job of these queues becomes claimable (NULL: none pending).
{include:_read_clock}
SELECT clock.now, (
    SELECT min(due.available_at)
    FROM unnest(%(queues)b::text[]) AS q (queue)
    CROSS JOIN LATERAL (
        SELECT j.available_at
        FROM {schema}.tenure_jobs AS j
        WHERE j.queue = q.queue
          AND j.state IN ('ready', 'leased')
          AND j.generation < %(max_generation)s::bigint
        ORDER BY j.available_at
        LIMIT 1
    ) AS due
    WHERE NOT EXISTS (SELECT FROM {schema}.tenure_queues AS p
                      WHERE p.queue = q.queue AND p.paused)
) AS due
FROM clock
