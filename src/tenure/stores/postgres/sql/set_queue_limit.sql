-- set_queue_limit: set (or with NULL clear) the queue's max_leased (idempotent). A limit
-- raised or cleared notifies the queue's name as a job becoming ready does, so idle
-- workers of it look at once.
WITH flag AS (
    INSERT INTO {schema}.tenure_queues (queue, paused, max_leased)
    VALUES (%(queue)s, false, %(max_leased)s::integer)
    ON CONFLICT (queue) DO UPDATE SET max_leased = EXCLUDED.max_leased
    RETURNING queue
)
SELECT f.queue, pg_notify('tenure_' || {schema_name}, f.queue)::text
FROM flag AS f
