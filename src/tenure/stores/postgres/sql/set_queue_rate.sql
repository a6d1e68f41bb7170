-- set_queue_rate: set (or with NULLs clear) the queue's token bucket. A new or changed
-- rate starts full (rate_at -infinity: refilled to its burst whatever the time); the same
-- rate set again keeps the bucket as it is, so setting it twice is setting it once. A rate
-- set or cleared notifies the queue's name as a job becoming ready does, so idle workers
-- of it look at once.
WITH flag AS (
    INSERT INTO {schema}.tenure_queues
        (queue, paused, rate_per_second, rate_burst, rate_tokens, rate_at)
    VALUES (%(queue)s, false, %(per_second)s::float8, %(burst)s::integer,
            %(burst)s::float8,
            CASE WHEN %(burst)s::integer IS NULL THEN NULL ELSE '-infinity'::float8 END)
    ON CONFLICT (queue) DO UPDATE SET
        rate_tokens = CASE WHEN (tenure_queues.rate_per_second, tenure_queues.rate_burst)
                                IS NOT DISTINCT FROM
                                (EXCLUDED.rate_per_second, EXCLUDED.rate_burst)
                           THEN tenure_queues.rate_tokens ELSE EXCLUDED.rate_tokens END,
        rate_at = CASE WHEN (tenure_queues.rate_per_second, tenure_queues.rate_burst)
                            IS NOT DISTINCT FROM
                            (EXCLUDED.rate_per_second, EXCLUDED.rate_burst)
                       THEN tenure_queues.rate_at ELSE EXCLUDED.rate_at END,
        rate_per_second = EXCLUDED.rate_per_second,
        rate_burst = EXCLUDED.rate_burst
    RETURNING queue
)
SELECT f.queue, pg_notify('tenure_' || {schema_name}, f.queue)::text
FROM flag AS f
