-- The start of each statement that needs store time (included by those files, which go on
-- with their own CTEs): "clock", one row whose column now is the time.
WITH floored AS (
    -- Only with the test hook (a store_clock given as %(now)s): its time never runs
    -- backwards. In production %(now)s is NULL and this touches nothing.
    UPDATE {schema}.tenure_clock SET floor = greatest(floor, %(now)s::float8)
    WHERE %(now)s::float8 IS NOT NULL
    RETURNING floor
),
clock AS MATERIALIZED (
    -- Store time, read once: the server's clock (or the hook's, floored). Unless the
    -- store's tables are no longer the ones this client opened (see _same_store.sql).
    SELECT CASE WHEN {include:_same_store}
        THEN coalesce((SELECT floor FROM floored), extract(epoch FROM clock_timestamp())::float8)
        ELSE {include:_store_replaced} END AS now
)
