-- Fleet-wide queue limits and rates (issue #18), the CTE "room" of a batch claim (included
-- by _claim_next_ctes.sql, after "clock" and "settled"): for each limited or rate-limited
-- queue of %(queues)b, how many more of its jobs may be leased, max_leased minus its
-- running leases (expired ones do not count; those of "settled", the jobs this very
-- statement completes, neither) and at most the whole tokens of its bucket, the time
-- ("now") its new leases start, and the bucket's tokens then ("tokens", NULL without a
-- rate; "spent" debits them). No row for a queue with neither. The
-- function (tenure_queue_room, schema.sql) first locks the limited queues' rows of
-- tenure_queues, then counts in a snapshot taken after the lock: so concurrent claims of
-- one limited queue run one after the other, each seeing the leases (and the bucket) of
-- those before it. Only when one of the queues asked has a limit or a rate: otherwise this is one probe of
-- tenure_queues per queue (a one-time filter; the function is not called).
room AS MATERIALIZED (
    SELECT r.queue, r.room, r.now, r.tokens
    FROM {schema}.tenure_queue_room(
        %(queues)b::text[], (SELECT now FROM clock), %(now)s::float8,
        ARRAY(SELECT s.job_id FROM settled AS s)
    ) AS r
    WHERE EXISTS (SELECT FROM {schema}.tenure_queues AS l
                  WHERE l.queue = ANY (%(queues)b::text[])
                    AND (l.max_leased IS NOT NULL OR l.rate_per_second IS NOT NULL))
)
