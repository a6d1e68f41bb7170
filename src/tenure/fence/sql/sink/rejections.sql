-- Refusals after an id, optionally of one job, oldest first.
SELECT id, kind, status, job_id, presented_generation, current_generation, effect_key, detail,
       method, path, rejected_at
FROM sink_rejections
WHERE id > :after AND (:job_id IS NULL OR job_id = :job_id)
ORDER BY id
LIMIT :limit
