-- schedules: every store schedule, by name.
SELECT name, cron, queue, payload, timezone, catch_up, max_attempts, created_at, updated_at
FROM tenure_schedules
ORDER BY name
