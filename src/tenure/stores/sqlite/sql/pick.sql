-- The next claimable job of one queue (ready and due, or leased with an expired lease):
-- the highest priority first, then the oldest by (available_at, seq); none while the queue
-- is paused, nor while it is limited and full. Walks tenure_jobs_claimable (migration 0008:
-- queue, priority DESC, available_at, seq), so the pick is O(log n) per priority level met.
-- Fleet-wide queue limits (issue #18): a limited queue is full while max_leased of its
-- jobs hold running leases (expired ones do not count); the count walks its leased rows by
-- tenure_jobs_listing (queue, state, seq). It is read again at each pick of the claim's own
-- BEGIN IMMEDIATE transaction, so the claims before it in the transaction count, and no
-- other writer can come between. An unpaused, unlimited queue costs one primary-key probe
-- of tenure_queues, as the pause alone did: a separate room statement per claim had cost
-- a tenth of a claim -> complete cycle (benchmarks/sqlite_cycle.py).
SELECT job_id, state, attempts, max_attempts, available_at, seq, priority
FROM tenure_jobs
WHERE queue = :queue
  AND state IN ('ready', 'leased')
  AND available_at <= :now
  AND generation < :max_generation
  AND NOT EXISTS (
      SELECT 1 FROM tenure_queues AS q
      WHERE q.queue = :queue
        AND (q.paused OR q.max_leased <= (
                SELECT count(*) FROM tenure_jobs AS l
                WHERE l.queue = :queue AND l.state = 'leased' AND l.lease_until > :now)))
ORDER BY priority DESC, available_at, seq
LIMIT 1
