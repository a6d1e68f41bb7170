-- submit.sql for each job of a batch, run with executemany (one C loop, no rows back): a
-- new id inserted, an existing one left as it is. The batch runs in one write
-- transaction, holding the write lock from its first statement (clock.sql), so the ids
-- found existing just before (existing.sql) are exactly those this leaves alone.
INSERT INTO tenure_jobs
    (job_id, queue, state, generation, available_at, attempts, max_attempts, payload,
     created_at, updated_at, priority, timeout, headers)
VALUES
    (:job_id, :queue, 'ready', 0, :now + :delay, 0, :max_attempts, :payload, :now, :now,
     :priority, :timeout, :headers)
ON CONFLICT (job_id) DO NOTHING
