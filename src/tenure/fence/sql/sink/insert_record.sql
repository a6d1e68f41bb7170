INSERT INTO sink_records (job_id, generation, effect_key, value, accepted_at)
VALUES (:job_id, :generation, :effect_key, :value, :at)
RETURNING id, job_id, generation, effect_key, value, accepted_at
