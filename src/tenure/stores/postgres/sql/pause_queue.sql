-- pause_queue / resume_queue: set the queue's paused flag (idempotent). A resume notifies
-- the queue's name as a job becoming ready does, so idle workers of it look at once.
WITH flag AS (
    INSERT INTO {schema}.tenure_queues (queue, paused)
    VALUES (%(queue)s, %(paused)s::boolean)
    ON CONFLICT (queue) DO UPDATE SET paused = EXCLUDED.paused
    RETURNING queue, paused
)
SELECT f.queue, pg_notify('tenure_' || {schema_name}, f.queue)::text
FROM flag AS f
WHERE NOT f.paused
