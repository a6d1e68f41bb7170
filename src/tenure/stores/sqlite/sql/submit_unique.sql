-- submit.sql for a job with a unique key (issue #18): the driver runs it only once it found
-- the id new and the key free (unique_holder.sql), in the same write transaction.
INSERT INTO tenure_jobs
    (job_id, queue, state, generation, available_at, attempts, max_attempts, payload,
     created_at, updated_at, priority, timeout,
     unique_key, unique_for, unique_holder, headers)
VALUES
    (:job_id, :queue, 'ready', 0, :now + :delay, 0, :max_attempts, :payload, :now, :now,
     :priority, :timeout, :unique_key, :unique_for, :unique_key, :headers)
RETURNING job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers
