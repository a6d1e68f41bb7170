-- remove_schedule: the schedule's row goes; its name comes back if there was one.
DELETE FROM tenure_schedules WHERE name = :name RETURNING name
