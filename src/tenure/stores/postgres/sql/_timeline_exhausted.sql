-- What a claim evaluates instead of a generation when the job's next one would pass the
-- last its timeline may issue (2^40 claims of one job on one timeline, or generations
-- carried over from a later timeline, e.g. after pg_upgrade, which starts again at
-- timeline 1): a failing cast, as in _store_replaced.sql, recognised by the driver
-- (TIMELINE_REFUSED in _common.py).
('tenure timeline exhausted: job ' || j.job_id || ' has generation ' || j.generation
 || ', the last this timeline may issue is ' || timeline.last || '; at '
 || clock_timestamp()::text)::bigint
