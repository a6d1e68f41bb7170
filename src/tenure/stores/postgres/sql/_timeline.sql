-- The "timeline" CTE of the statements that issue generations (after "clock"): the base of
-- the server's current timeline, (timeline - 1) << 40, and the last generation it may
-- issue, base + 2^40 - 1. Each claim's generation is at least the base, so after a
-- promotion (a new timeline) every generation issued is above every one issued before it,
-- even those the promoted replica never received (asynchronous replication). The timeline
-- is the first 8 hex digits of the current WAL file's name: it changes at once on
-- promotion (pg_control_checkpoint() lags until the next checkpoint). Read once per
-- statement; on a standby pg_current_wal_lsn() fails ("recovery is in progress"), which the
-- driver reports as StoreUnavailable (the UPDATE could not run there anyway). Timelines
-- above 2^23 would take the base past 2^63: refused (_timeline_exhausted.sql's words).
timeline AS MATERIALIZED (
    SELECT CASE WHEN w.id BETWEEN 1 AND 8388608 THEN (w.id - 1) << 40
                ELSE ('tenure timeline out of range: the server is on timeline ' || w.id
                      || ', above 2^23, where generations would pass 2^63; at '
                      || clock_timestamp()::text)::bigint END AS base,
           CASE WHEN w.id BETWEEN 1 AND 8388608 THEN ((w.id - 1) << 40) + 1099511627775
                ELSE 0 END AS last
    FROM (SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
          AS id) AS w
)
