-- Jobs oldest first, optionally of one queue and/or state; one row with NULL job columns
-- when there are none, so that the store time always comes back.
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
SELECT clock.now, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at
FROM clock
LEFT JOIN LATERAL (
    SELECT *
    FROM {schema}.tenure_jobs
    WHERE (%(queue)s::text IS NULL OR queue = %(queue)s::text)
      AND (%(state)s::text IS NULL OR state = %(state)s::text)
    ORDER BY seq
    LIMIT %(limit)s
) AS j ON true
ORDER BY j.seq
