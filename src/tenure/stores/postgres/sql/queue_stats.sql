-- queue_stats: the live jobs (ready, leased) of every queue, counted by state, with the
-- oldest due ready job. Its two arms are the predicates of the partial indexes
-- tenure_jobs_queued and tenure_jobs_leased, so the count walks the backlog (those
-- indexes), not the finished jobs. One row with NULL columns when no job is live, so the store time comes back.
WITH clock AS MATERIALIZED (
    -- Store time, read once: the server's clock (or the test hook's, floored).
    SELECT coalesce(
        (SELECT greatest(floor, %(now)s::float8) FROM {schema}.tenure_clock
         WHERE %(now)s::float8 IS NOT NULL),
        extract(epoch FROM clock_timestamp())::float8
    ) AS now
)
SELECT clock.now, s.queue, s.ready, s.scheduled, s.leased, s.expired, s.oldest_ready_at
FROM clock
LEFT JOIN LATERAL (
    SELECT queue,
           count(*) FILTER (WHERE state = 'ready' AND available_at <= clock.now) AS ready,
           count(*) FILTER (WHERE state = 'ready' AND available_at > clock.now) AS scheduled,
           count(*) FILTER (WHERE state = 'leased' AND lease_until > clock.now) AS leased,
           count(*) FILTER (WHERE state = 'leased' AND lease_until <= clock.now) AS expired,
           min(available_at) FILTER (WHERE state = 'ready' AND available_at <= clock.now)
               AS oldest_ready_at
    -- One arm per state, each the predicate of its partial index.
    FROM (SELECT queue, state, available_at, lease_until FROM {schema}.tenure_jobs
          WHERE state = 'ready'
          UNION ALL
          SELECT queue, state, available_at, lease_until FROM {schema}.tenure_jobs
          WHERE state = 'leased' AND lease_min_end IS NOT NULL) AS live
    GROUP BY queue
) AS s ON true
ORDER BY s.queue
