-- When the next job of one queue becomes claimable (NULL when the queue has none pending).
SELECT available_at
FROM tenure_jobs
WHERE queue = :queue AND state IN ('ready', 'leased') AND generation < :max_generation
  AND NOT EXISTS (SELECT 1 FROM tenure_queues WHERE queue = :queue AND paused)
  -- Queue limits (issue #18): a limited queue with no room falls due when its first
  -- running lease ends (a leased job's available_at is its lease's end).
  AND (state = 'leased' AND available_at > :now
       OR NOT EXISTS (SELECT 1 FROM tenure_queues AS l
                      WHERE l.queue = :queue
                        AND l.max_leased <= (SELECT count(*) FROM tenure_jobs AS r
                                             WHERE r.queue = :queue AND r.state = 'leased'
                                               AND r.lease_until > :now)))
ORDER BY available_at, seq
LIMIT 1
