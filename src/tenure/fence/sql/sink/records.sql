-- Accepted records after an id, optionally of one job, oldest first.
SELECT id, job_id, generation, effect_key, value, accepted_at
FROM sink_records
WHERE id > :after AND (:job_id IS NULL OR job_id = :job_id)
ORDER BY id
LIMIT :limit
