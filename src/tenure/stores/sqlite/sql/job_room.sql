-- Fleet-wide queue limits and rates, for a claim by id: whether the job's queue may lease
-- one more job at :now (room: fewer than max_leased running leases, expired ones not
-- counted, as in pick.sql; and a whole token in its bucket, as in pick.sql), and whether
-- it is rate-limited (a lease granted then spends a token, spend_token.sql). No row when
-- the job is missing or its queue has neither a limit nor a rate.
SELECT (q.max_leased IS NULL OR q.max_leased > (
            SELECT count(*) FROM tenure_jobs AS j
            WHERE j.queue = q.queue AND j.state = 'leased' AND j.lease_until > :now))
       AND (q.rate_per_second IS NULL
            OR q.rate_tokens + (max(0, :now - q.rate_at) + 1e-5) * q.rate_per_second >= 1),
       q.rate_per_second IS NOT NULL
FROM tenure_jobs AS t
JOIN tenure_queues AS q ON q.queue = t.queue
WHERE t.job_id = :job_id AND (q.max_leased IS NOT NULL OR q.rate_per_second IS NOT NULL)
