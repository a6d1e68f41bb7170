-- Run after a commit of this client ended with the "might not have been replicated"
-- warning (see _bound.py): a write of its own (the clock row written with its own value:
-- no change, but a WAL record, so its commit waits for the synchronous standby as any
-- write's does; a transaction id alone writes no WAL and would not wait). It commits
-- without that warning only once the standby confirmed everything up to it, the earlier
-- commit included.
UPDATE {schema}.tenure_clock SET floor = floor WHERE id = 0
RETURNING extract(epoch FROM clock_timestamp())::float8 AS now
