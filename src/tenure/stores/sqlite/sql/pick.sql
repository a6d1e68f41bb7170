-- The oldest claimable job of one queue (ready and due, or leased with an expired lease);
-- none while the queue is paused.
SELECT job_id, state, attempts, max_attempts, available_at, seq
FROM tenure_jobs
WHERE queue = :queue
  AND state IN ('ready', 'leased')
  AND available_at <= :now
  AND generation < :max_generation
  AND NOT EXISTS (SELECT 1 FROM tenure_queues WHERE queue = :queue AND paused)
ORDER BY available_at, seq
LIMIT 1
