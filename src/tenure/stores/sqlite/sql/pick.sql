-- The next claimable job of one queue (ready and due, or leased with an expired lease):
-- the highest priority first, then the oldest by (available_at, seq); none while the queue
-- is paused, nor while it is limited and full, nor while it is rate-limited without a whole
-- token. Up to two candidates, and the driver takes the better one by `pick_ahead`, as it
-- does between queues (migration 0012): the best due ready job, read from the head of
-- tenure_jobs_ready (queue, priority DESC, available_at, seq), O(log n) per priority level
-- met; and the best expired lease, from the start of tenure_jobs_leased (queue,
-- available_at), which holds a leased job by its lease's end: the walk stops at the first
-- running lease, so however many leases run, the pick reads only the expired ones. (Ordering
-- the two rows here cost a sorter per pick, 2.5 us of a 7.5 us statement.) INDEXED BY makes
-- a change of schema that loses either path an error, not a silent walk of every lease.
-- Fleet-wide queue limits (issue #18): a limited queue is full while max_leased of its
-- jobs hold running leases (expired ones do not count); the count walks the running leases
-- of tenure_jobs_leased. It is read again at each pick of the claim's own BEGIN IMMEDIATE
-- transaction, so the claims before it in the transaction count, and no other writer can
-- come between. An unpaused, unlimited queue costs one primary-key probe of tenure_queues,
-- as the pause alone did: a separate room statement per claim had cost a tenth of a
-- claim -> complete cycle (benchmarks/sqlite_cycle.py).
-- Fleet-wide queue rates (migration 0011): the bucket's tokens at :now (rate_tokens at
-- rate_at, plus the refill since; the cap at rate_burst does not matter to "under 1"). The
-- 1e-5 s of refill early forgives the rounding of store times (doubles of epoch seconds
-- step by 2.4e-7 s), so a wait that ends when the next token is due (next_due.sql) finds it.
-- "rated" tells the driver to spend a token for the lease it grants (spend_token.sql).
SELECT u.*,
       (SELECT r.rate_per_second IS NOT NULL FROM tenure_queues AS r WHERE r.queue = :queue)
           AS rated
FROM (
    SELECT * FROM (
        SELECT job_id, state, attempts, max_attempts, available_at, seq, priority
        FROM tenure_jobs INDEXED BY tenure_jobs_ready
        WHERE queue = :queue AND state = 'ready' AND available_at <= :now
          AND generation < :max_generation
        ORDER BY priority DESC, available_at, seq
        LIMIT 1)
    UNION ALL
    -- Expired leases are ordered by a sorter, which SQLite opens whenever that read runs,
    -- 1.2 us a pick; so it runs only once the queue's first lease end (one index entry) has
    -- passed, and answers the row's key.
    SELECT job_id, state, attempts, max_attempts, available_at, seq, priority
    FROM tenure_jobs
    WHERE seq = (
        SELECT CASE
            WHEN (SELECT min(available_at) FROM tenure_jobs INDEXED BY tenure_jobs_leased
                  WHERE queue = :queue AND state = 'leased') <= :now
            THEN (SELECT seq FROM tenure_jobs INDEXED BY tenure_jobs_leased
                  WHERE queue = :queue AND state = 'leased' AND available_at <= :now
                    AND generation < :max_generation
                  ORDER BY priority DESC, available_at, seq
                  LIMIT 1)
        END)) AS u
WHERE NOT EXISTS (
    SELECT 1 FROM tenure_queues AS q
    WHERE q.queue = :queue
      AND (q.paused
           OR q.rate_tokens + (max(0, :now - q.rate_at) + 1e-5) * q.rate_per_second < 1
           OR q.max_leased <= (
              SELECT count(*) FROM tenure_jobs INDEXED BY tenure_jobs_leased
              WHERE queue = :queue AND state = 'leased' AND available_at > :now)))
