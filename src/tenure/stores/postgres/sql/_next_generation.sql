-- The generation a claim of row j issues: above the job's own and the floor of deleted
-- jobs' generations (tenure_floor), and at least the base of the server's timeline
-- (_timeline.sql). A job whose next generation would reach the next timeline's base,
-- 2^40 claims above its own timeline's, is refused: a promotion could reissue it. Only
-- at that crossing: a generation already above it (set by hand, or carried over from a
-- later timeline, e.g. by pg_upgrade) goes on counting to 2^63 - 1, unprotected (see
-- "Failover" in docs/postgres.md). A failing cast whose words the driver recognises
-- (TIMELINE_LIMIT in _common.py): the statement changes nothing.
(SELECT CASE WHEN n.next - n.base = 1099511627776
             THEN ('tenure timeline limit: generation ' || n.next || ', timeline '
                   || ((n.base >> 40) + 1) || ', job ' || j.job_id)::bigint
             ELSE greatest(n.next, n.base) END
 FROM (SELECT greatest(j.generation, (SELECT f.generation FROM {schema}.tenure_floor AS f
                                      WHERE f.id = 0)) + 1 AS next,
              {include:_timeline} AS base) AS n)
