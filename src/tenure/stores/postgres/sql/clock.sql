-- now(): the store's time. With the test hook it raises the floor, like a write.
WITH floored AS (
    -- Only with the test hook (a store_clock given as %(now)s): its time never runs
    -- backwards. In production %(now)s is NULL and this touches nothing.
    UPDATE {schema}.tenure_clock SET floor = greatest(floor, %(now)s::float8)
    WHERE %(now)s::float8 IS NOT NULL
    RETURNING floor
),
clock AS MATERIALIZED (
    -- Store time, read once: the server's clock (or the hook's, floored).
    SELECT coalesce((SELECT floor FROM floored), extract(epoch FROM clock_timestamp())::float8)
        AS now
)
SELECT clock.now FROM clock
