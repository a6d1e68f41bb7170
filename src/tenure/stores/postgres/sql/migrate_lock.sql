-- Serialises migrations of one schema: concurrent `tenure migrate` runs or first connects
-- wait here, then find the work done.
SELECT pg_advisory_xact_lock(hashtext('tenure migrations'), hashtext({schema_name}))
