-- submit.sql for many jobs in one statement: each new id inserted, each existing one left
-- unchanged and reported. One answer row per submission, in input order (position).
-- (Rarely, a concurrent submit of the same id commits after this statement's snapshot:
-- then that submission has no row and the driver reads the job with get.sql.)
{include:_clock},
todo AS MATERIALIZED (
    -- Submission numbers (seq, the FIFO tie-break) drawn in input order, so that a batch
    -- is claimed in its own order...
    SELECT t.*, nextval(pg_get_serial_sequence({jobs_table}, 'seq')) AS seq
    FROM (
        SELECT t.job_id, t.queue, t.payload, t.delay, t.max_attempts, t.position, t.priority,
               t.timeout, t.headers
        FROM unnest(
            %(job_ids)b::text[],
            %(queues)b::text[],
            %(payloads)b::text[],
            %(delays)b::float8[],
            %(max_attempts)b::integer[],
            %(priorities)b::integer[],
            %(timeouts)b::float8[],
            %(headers)b::text[]
        ) WITH ORDINALITY
            AS t (job_id, queue, payload, delay, max_attempts, priority, timeout, headers,
                  position)
        ORDER BY t.position
    ) AS t
),
applied AS (
    INSERT INTO {schema}.tenure_jobs AS j
        (seq, job_id, queue, state, generation, available_at, attempts, max_attempts, payload,
         created_at, updated_at, priority, timeout, headers)
    OVERRIDING SYSTEM VALUE
    SELECT t.seq, t.job_id, t.queue, 'ready', 0, clock.now + t.delay, 0, t.max_attempts,
           t.payload, clock.now, clock.now, t.priority, t.timeout, t.headers
    FROM todo AS t, clock
    -- ...while the rows are inserted (and their ids locked) in id order: the same for every
    -- batch, so two batches sharing ids wait for each other instead of deadlocking.
    ORDER BY t.job_id
    ON CONFLICT (job_id) DO NOTHING
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
)
SELECT 'applied' AS status, a.job_id, a.queue, a.state, a.owner, a.generation, a.secret_hash, a.lease_until, a.available_at, a.attempts, a.max_attempts, a.payload, a.result, a.error, a.created_at, a.updated_at, a.priority, a.timeout, a.unique_key, a.headers, clock.now, t.position
FROM applied AS a JOIN todo AS t ON t.job_id = a.job_id, clock
UNION ALL
SELECT 'missed', j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now, t.position
FROM todo AS t
-- Each existing job by a primary-key probe of its own (LATERAL ... OFFSET 0, as in
-- _held.sql): a join, planned from statistics that said the table was empty, read the
-- primary key from its start for each submission (tests/postgres/test_batch_plans.py).
CROSS JOIN LATERAL (
    SELECT e.* FROM {schema}.tenure_jobs AS e WHERE e.job_id = t.job_id OFFSET 0
) AS j
CROSS JOIN clock
-- A hashed NOT IN (see _batch_answer.sql).
WHERE t.job_id NOT IN (SELECT a.job_id FROM applied AS a)
ORDER BY position
