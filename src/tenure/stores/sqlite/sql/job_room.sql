-- Fleet-wide queue limits, for a claim by id: the room of the job's queue (as in
-- queue_room.sql), or no row when the job is missing or its queue unlimited.
SELECT max(q.max_leased - (
    SELECT count(*) FROM tenure_jobs AS j
    WHERE j.queue = q.queue AND j.state = 'leased' AND j.lease_until > :now
), 0)
FROM tenure_jobs AS t
JOIN tenure_queues AS q ON q.queue = t.queue
WHERE t.job_id = :job_id AND q.max_leased IS NOT NULL
