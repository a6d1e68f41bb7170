-- queue_stats: the live jobs (ready, leased) of every queue, counted by state, with the
-- oldest due ready job, as of store time :now (read_clock.sql, in the same transaction).
-- Read from the claim's two partial indexes (migration 0012), each read whole (a
-- leased job's available_at is its lease's end): the count walks the backlog, not the
-- finished jobs, whatever the statistics make of the other indexes.
SELECT queue,
       sum(ready) AS ready,
       sum(scheduled) AS scheduled,
       sum(leased) AS leased,
       sum(expired) AS expired,
       min(oldest_ready_at) AS oldest_ready_at
FROM (
    SELECT queue,
           available_at <= :now AS ready,
           available_at > :now AS scheduled,
           0 AS leased,
           0 AS expired,
           CASE WHEN available_at <= :now THEN available_at END AS oldest_ready_at
    FROM tenure_jobs INDEXED BY tenure_jobs_ready
    WHERE state = 'ready'
    UNION ALL
    SELECT queue, 0, 0, available_at > :now, available_at <= :now, NULL
    FROM tenure_jobs INDEXED BY tenure_jobs_leased
    WHERE state = 'leased')
GROUP BY queue
ORDER BY queue
