-- The next claimable job of one queue (ready and due, or leased with an expired lease):
-- the highest priority first, then the oldest by (available_at, seq); none while the queue
-- is paused, nor while it is limited and full, nor while it is rate-limited without a whole
-- token. Walks tenure_jobs_claimable (migration 0008: queue, priority DESC, available_at,
-- seq), so the pick is O(log n) per priority level met.
-- Fleet-wide queue limits (issue #18): a limited queue is full while max_leased of its
-- jobs hold running leases (expired ones do not count); the count walks its leased rows by
-- tenure_jobs_listing (queue, state, seq). It is read again at each pick of the claim's own
-- BEGIN IMMEDIATE transaction, so the claims before it in the transaction count, and no
-- other writer can come between. An unpaused, unlimited queue costs one primary-key probe
-- of tenure_queues, as the pause alone did: a separate room statement per claim had cost
-- a tenth of a claim -> complete cycle (benchmarks/sqlite_cycle.py).
-- Fleet-wide queue rates (migration 0011): the bucket's tokens at :now (rate_tokens at
-- rate_at, plus the refill since; the cap at rate_burst does not matter to "under 1"). The
-- 1e-5 s of refill early forgives the rounding of store times (doubles of epoch seconds
-- step by 2.4e-7 s), so a wait that ends when the next token is due (next_due.sql) finds it.
-- "rated" tells the driver to spend a token for the lease it grants (spend_token.sql).
SELECT job_id, state, attempts, max_attempts, available_at, seq, priority,
       (SELECT r.rate_per_second IS NOT NULL FROM tenure_queues AS r WHERE r.queue = :queue)
           AS rated
FROM tenure_jobs
WHERE queue = :queue
  AND state IN ('ready', 'leased')
  AND available_at <= :now
  AND generation < :max_generation
  AND NOT EXISTS (
      SELECT 1 FROM tenure_queues AS q
      WHERE q.queue = :queue
        AND (q.paused
             OR q.rate_tokens + (max(0, :now - q.rate_at) + 1e-5) * q.rate_per_second < 1
             OR q.max_leased <= (
                SELECT count(*) FROM tenure_jobs AS l
                WHERE l.queue = :queue AND l.state = 'leased' AND l.lease_until > :now)))
ORDER BY priority DESC, available_at, seq
LIMIT 1
