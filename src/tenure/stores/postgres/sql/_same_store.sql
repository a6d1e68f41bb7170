-- Whether the store is still the one this client opened (part of the "clock" CTE of every
-- statement, see _clock.sql): its jobs table is the same table (pg_restore --clean, or a
-- drop and re-create, makes a new one, with a new oid; compared with the one the client
-- read when it opened the store, store_open.sql) and, in the statements that issue
-- generations (the claims), the store id's row is the same row version (_same_rows.sql;
-- elsewhere true). The oid comparison is planned as a constant (a drop of the table
-- invalidates the plan): free. Statements rendered without what the client read compare
-- each with itself.
{jobs_table}::regclass::oid = {jobs_oid}::oid AND {same_rows}
