-- submit.sql for each job of a batch, run with executemany (one C loop, no rows back): a
-- new id inserted, an existing one left as it is. The batch runs in one write
-- transaction, holding the write lock from its first statement (clock.sql), so the ids
-- found existing just before (existing.sql) are exactly those this leaves alone.
-- Numbered parameters, bound from a tuple per job (cheaper to make and to bind than a
-- dict): ?1 job_id, ?2 queue, ?3 now, ?4 delay, ?5 max_attempts, ?6 payload, ?7 priority,
-- ?8 timeout, ?9 headers.
INSERT INTO tenure_jobs
    (job_id, queue, state, generation, available_at, attempts, max_attempts, payload,
     created_at, updated_at, priority, timeout, headers)
VALUES
    (?1, ?2, 'ready', 0, ?3 + ?4, 0, ?5, ?6, ?3, ?3, ?7, ?8, ?9)
ON CONFLICT (job_id) DO NOTHING
