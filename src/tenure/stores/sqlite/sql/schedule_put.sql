-- add_schedule: insert or replace the schedule by name; a replaced one keeps created_at.
INSERT INTO tenure_schedules
    (name, cron, queue, payload, timezone, catch_up, max_attempts, created_at, updated_at)
VALUES (:name, :cron, :queue, :payload, :timezone, :catch_up, :max_attempts, :now, :now)
ON CONFLICT (name) DO UPDATE SET
    cron = excluded.cron,
    queue = excluded.queue,
    payload = excluded.payload,
    timezone = excluded.timezone,
    catch_up = excluded.catch_up,
    max_attempts = excluded.max_attempts,
    updated_at = excluded.updated_at
RETURNING name, cron, queue, payload, timezone, catch_up, max_attempts, created_at, updated_at
