-- The next claimable job of one queue (ready and due, or leased with an expired lease):
-- the highest priority first, then the oldest by (available_at, seq); none while the queue
-- is paused. Walks tenure_jobs_claimable (migration 0008: queue, priority DESC,
-- available_at, seq), so the pick is O(log n) per priority level met.
SELECT job_id, state, attempts, max_attempts, available_at, seq, priority
FROM tenure_jobs
WHERE queue = :queue
  AND state IN ('ready', 'leased')
  AND available_at <= :now
  AND generation < :max_generation
  AND NOT EXISTS (SELECT 1 FROM tenure_queues WHERE queue = :queue AND paused)
ORDER BY priority DESC, available_at, seq
LIMIT 1
