-- queue_stats: the live jobs (ready, leased) of every queue, counted by state, with the
-- oldest due ready job, as of store time :now (read_clock.sql, in the same transaction).
-- WHERE state IN ('ready', 'leased') is read from tenure_jobs_by_state (state, seq), two
-- ranges: the count walks the backlog, not the finished jobs.
SELECT queue,
       sum(state = 'ready' AND available_at <= :now) AS ready,
       sum(state = 'ready' AND available_at > :now) AS scheduled,
       sum(state = 'leased' AND lease_until > :now) AS leased,
       sum(state = 'leased' AND lease_until <= :now) AS expired,
       min(CASE WHEN state = 'ready' AND available_at <= :now THEN available_at END)
           AS oldest_ready_at
FROM tenure_jobs
WHERE state IN ('ready', 'leased')
GROUP BY queue
ORDER BY queue
