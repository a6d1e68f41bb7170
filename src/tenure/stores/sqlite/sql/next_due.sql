-- When the next job of one queue becomes claimable (NULL when the queue has none pending).
SELECT available_at
FROM tenure_jobs
WHERE queue = :queue AND state IN ('ready', 'leased') AND generation < :max_generation
  AND NOT EXISTS (SELECT 1 FROM tenure_queues WHERE queue = :queue AND paused)
ORDER BY available_at, seq
LIMIT 1
