-- Whether the store is still the one this client opened (part of the "clock" CTE of every
-- statement, see _clock.sql): its jobs table is the same table (pg_restore --clean, or a
-- drop and re-create, makes a new one, with a new oid) and the row of its id is the same
-- row version (a data-only restore writes it again: a new xmin). {jobs_oid} and {id_xmin}
-- are what the client read when it opened the store (store_open.sql); statements rendered
-- without them compare each with itself. The first comparison is planned as a constant (a
-- drop of the table invalidates the plan); the second is one probe of a two-row table.
{jobs_table}::regclass::oid = {jobs_oid}::oid
        AND (SELECT m.xmin = {id_xmin}::xid FROM {schema}.tenure_meta AS m WHERE m.key = 'store_id')
