-- submit.sql for each job of a batch, run with executemany (one C loop, no rows back): a
-- new id inserted, an existing one left as it is. The batch runs in one write
-- transaction, holding the write lock from its first statement (clock.sql), so the ids
-- found existing just before (existing.sql) are exactly those this leaves alone.
-- Positional parameters, bound from a tuple per job (cheaper to make and to bind than a
-- dict): job_id, queue, now, delay, max_attempts, payload, now, now, priority, timeout,
-- headers. Plain "?" rather than numbered "?NNN", which Python 3.12's sqlite3 counts as
-- named, warns about when bound from a tuple, and 3.14 refuses.
INSERT INTO tenure_jobs
    (job_id, queue, state, generation, available_at, attempts, max_attempts, payload,
     created_at, updated_at, priority, timeout, headers)
VALUES
    (?, ?, 'ready', 0, ? + ?, 0, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (job_id) DO NOTHING
