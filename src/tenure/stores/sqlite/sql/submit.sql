INSERT INTO tenure_jobs
    (job_id, queue, state, generation, available_at, attempts, max_attempts, payload,
     created_at, updated_at, priority, timeout, headers)
VALUES
    (:job_id, :queue, 'ready', 0, :now + :delay, 0, :max_attempts, :payload, :now, :now,
     :priority, :timeout, :headers)
ON CONFLICT (job_id) DO NOTHING
RETURNING job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
