SELECT id, job_id, generation, effect_key, value, accepted_at
FROM sink_records WHERE job_id = :job_id AND effect_key = :effect_key
