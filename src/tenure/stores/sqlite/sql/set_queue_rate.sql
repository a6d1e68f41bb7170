-- set_queue_rate: set (or with NULLs clear) the queue's token bucket. A new or changed
-- rate starts full at :now; the same rate set again keeps the bucket as it is, so setting
-- it twice is setting it once (the SET's right-hand sides read the row before the update).
INSERT INTO tenure_queues (queue, paused, rate_per_second, rate_burst, rate_tokens, rate_at)
VALUES (:queue, 0, :per_second, :burst, :burst, CASE WHEN :burst IS NULL THEN NULL ELSE :now END)
ON CONFLICT (queue) DO UPDATE SET
    rate_tokens = CASE WHEN rate_per_second IS excluded.rate_per_second
                        AND rate_burst IS excluded.rate_burst
                       THEN rate_tokens ELSE excluded.rate_tokens END,
    rate_at = CASE WHEN rate_per_second IS excluded.rate_per_second
                    AND rate_burst IS excluded.rate_burst
                   THEN rate_at ELSE excluded.rate_at END,
    rate_per_second = excluded.rate_per_second,
    rate_burst = excluded.rate_burst
