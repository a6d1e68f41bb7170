-- remove_schedule: the schedule's row goes; its name comes back if there was one.
DELETE FROM {schema}.tenure_schedules WHERE name = %(name)s::text RETURNING name
