-- Store time now, and when the next job of these queues becomes claimable (NULL: none pending).
WITH clock AS MATERIALIZED (
    -- Store time, read once: the server's clock (or the test hook's, floored).
    -- Unless the store's tables are no longer the ones this client opened (see
    -- _same_store.sql).
    SELECT CASE WHEN {include:_same_store} THEN coalesce(
        (SELECT greatest(floor, %(now)s::float8) FROM {schema}.tenure_clock
         WHERE %(now)s::float8 IS NOT NULL),
        extract(epoch FROM clock_timestamp())::float8
    ) ELSE {include:_store_replaced} END AS now
)
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
) AS due
FROM clock
