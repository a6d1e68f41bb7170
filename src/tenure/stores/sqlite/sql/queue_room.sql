-- Fleet-wide queue limits (issue #18): for each limited queue of :queues (a JSON array),
-- how many more of its jobs may be leased at :now: max_leased minus its running leases
-- (expired ones do not count), never below 0. No row for an unlimited queue. The count
-- walks the queue's leased rows by tenure_jobs_listing (queue, state, seq).
SELECT q.queue, max(q.max_leased - (
    SELECT count(*) FROM tenure_jobs AS j
    WHERE j.queue = q.queue AND j.state = 'leased' AND j.lease_until > :now
), 0)
FROM tenure_queues AS q
WHERE q.queue IN (SELECT value FROM json_each(:queues)) AND q.max_leased IS NOT NULL
