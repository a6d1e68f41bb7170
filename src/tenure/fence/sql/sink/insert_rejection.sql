INSERT INTO sink_rejections
    (kind, status, job_id, presented_generation, current_generation, effect_key, detail,
     method, path, rejected_at)
VALUES (:kind, :status, :job_id, :presented_generation, :current_generation, :effect_key,
        :detail, :method, :path, :at)
