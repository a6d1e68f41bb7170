-- add_schedule: insert or replace the schedule by name, by store time; a replaced one keeps
-- its created_at.
{include:_clock},
put AS (
    INSERT INTO {schema}.tenure_schedules AS s
        (name, cron, queue, payload, timezone, catch_up, max_attempts, created_at, updated_at)
    SELECT %(name)s::text, %(cron)s::text, %(queue)s::text, %(payload)s::text,
           %(timezone)s::text, %(catch_up)s::text, %(max_attempts)s::integer,
           clock.now, clock.now
    FROM clock
    ON CONFLICT (name) DO UPDATE SET
        cron = EXCLUDED.cron,
        queue = EXCLUDED.queue,
        payload = EXCLUDED.payload,
        timezone = EXCLUDED.timezone,
        catch_up = EXCLUDED.catch_up,
        max_attempts = EXCLUDED.max_attempts,
        updated_at = EXCLUDED.updated_at
    RETURNING s.name, s.cron, s.queue, s.payload, s.timezone, s.catch_up, s.max_attempts,
              s.created_at, s.updated_at
)
SELECT * FROM put
