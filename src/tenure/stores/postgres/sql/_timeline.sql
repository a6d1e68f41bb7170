-- The base of the server's current timeline, (timeline - 1) << 40, in the statements that
-- issue generations: each claim's generation is at least the base, so after a promotion
-- (a new timeline) every generation issued is above every one issued before it, even
-- those the promoted replica never received (asynchronous replication), as long as no job
-- went past 2^40 claims on the earlier timeline (see "Failover" in docs/postgres.md). The
-- timeline is the first 8 hex digits of the current WAL file's name: it changes at once on
-- promotion (pg_control_checkpoint() lags until the next checkpoint). An uncorrelated
-- subquery: evaluated once per statement (5 us cheaper than a CTE joined in). On a standby
-- pg_current_wal_lsn() fails ("recovery is in progress"), which the driver reports as
-- StoreUnavailable (the UPDATE could not run there anyway). A timeline above 2^23 would
-- take the base past 2^63: a failing cast, as in _store_replaced.sql, with words the
-- driver recognises (TIMELINE_REFUSED in _common.py).
(SELECT CASE WHEN w.id BETWEEN 1 AND 8388608 THEN (w.id - 1) << 40
             ELSE ('tenure timeline out of range: the server is on timeline ' || w.id
                   || ', above 2^23, where generations would pass 2^63; at '
                   || clock_timestamp()::text)::bigint END
 FROM (SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
       AS id) AS w)
