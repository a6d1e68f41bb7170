-- Wakes this store's own waiters when it is closed. The empty payload names no queue, so
-- other clients' waiters look and go back to waiting.
SELECT pg_notify('tenure_' || {schema_name}, '')
