-- When the next job of one queue becomes claimable (NULL when the queue has none pending).
-- Fleet-wide queue rates (migration 0011): a rate-limited queue without a whole token falls
-- due no sooner than its next token (rate_tokens reaches 1 at rate_at + (1 - rate_tokens) /
-- rate_per_second), so an idle worker sleeps until then rather than ask again and again.
SELECT max(d.available_at, coalesce((
    SELECT q.rate_at + (1 - q.rate_tokens) / q.rate_per_second
    FROM tenure_queues AS q
    WHERE q.queue = :queue AND q.rate_per_second IS NOT NULL
      AND q.rate_tokens + (max(0, :now - q.rate_at) + 1e-5) * q.rate_per_second < 1
), d.available_at))
FROM (
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
) AS d
