-- The start of each read-only statement that needs store time (included by those files,
-- which go on with their own CTEs): "clock", one row whose column now is the time. As
-- _clock.sql, but without writing: with the test hook (a store_clock given as %(now)s) the
-- hook's time is floored by the last one a write recorded; in production %(now)s is NULL.
WITH clock AS MATERIALIZED (
    -- Store time, read once: the server's clock (or the test hook's, floored). Unless the
    -- store's tables are no longer the ones this client opened (see _same_store.sql).
    SELECT CASE WHEN {include:_same_store} THEN coalesce(
        (SELECT greatest(floor, %(now)s::float8) FROM {schema}.tenure_clock
         WHERE %(now)s::float8 IS NOT NULL),
        extract(epoch FROM clock_timestamp())::float8
    ) ELSE {include:_store_replaced} END AS now
)
