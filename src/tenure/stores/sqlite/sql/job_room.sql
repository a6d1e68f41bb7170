-- Fleet-wide queue limits, for a claim by id: how many more jobs the job's queue may lease
-- at :now, max_leased minus its running leases (expired ones do not count; the count as in
-- pick.sql), never below 0; no row when the job is missing or its queue unlimited.
SELECT max(q.max_leased - (
    SELECT count(*) FROM tenure_jobs AS j
    WHERE j.queue = q.queue AND j.state = 'leased' AND j.lease_until > :now
), 0)
FROM tenure_jobs AS t
JOIN tenure_queues AS q ON q.queue = t.queue
WHERE t.job_id = :job_id AND q.max_leased IS NOT NULL
