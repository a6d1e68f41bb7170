-- Fleet-wide queue rates: a lease granted in the rate-limited :queue takes one token of its
-- bucket, refilled to :now first (at most rate_burst). Run in the claim's own write
-- transaction, right after the claim, so the next pick of the transaction sees it.
UPDATE tenure_queues
SET rate_tokens = min(rate_burst, rate_tokens + max(0, :now - rate_at) * rate_per_second) - 1,
    rate_at = max(rate_at, :now)
WHERE queue = :queue AND rate_per_second IS NOT NULL
