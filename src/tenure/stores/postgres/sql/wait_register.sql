-- store.wait: register a waiter for one job (the trigger tenure_jobs_updated notifies only
-- jobs someone waits for), dropping the registrations of waiters that vanished.
WITH expired AS (
    DELETE FROM {schema}.tenure_waiters WHERE until < extract(epoch FROM clock_timestamp())
)
INSERT INTO {schema}.tenure_waiters (waiter, job_id, until)
VALUES (%(waiter)s, %(job_id)s, extract(epoch FROM clock_timestamp()) + %(ttl)s::float8)
