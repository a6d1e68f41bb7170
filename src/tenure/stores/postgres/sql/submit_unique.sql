-- submit.sql for a job with a unique key (issue #18). An existing id is answered first, as
-- by submit.sql. Else the job holding the key (unique_holder, at most one) is answered
-- while it holds it: unfinished, or finished (updated_at: when) less than its own
-- unique_for ago. Else the new job takes the key over: the old holder is released and the
-- job inserted with unique_holder set; the unique index tenure_jobs_unique makes a racing
-- submit of the same key insert nothing (ON CONFLICT DO NOTHING waits for the winner). A
-- submit that lost such a race answers no row: the driver runs it again, and its new
-- snapshot sees the winner.
{include:_clock},
existing AS (
    SELECT j.job_id FROM {schema}.tenure_jobs AS j WHERE j.job_id = %(job_id)s
),
holder AS MATERIALIZED (
    SELECT j.job_id,
        j.state IN ('ready', 'leased')
            OR (j.unique_for IS NOT NULL AND j.updated_at + j.unique_for > clock.now) AS holds
    FROM {schema}.tenure_jobs AS j, clock
    WHERE j.unique_holder = %(unique_key)s AND NOT EXISTS (SELECT FROM existing)
),
released AS (
    -- Rechecked on the row's newest version (READ COMMITTED): a holder requeued or released
    -- by a concurrent submit meanwhile is left alone, and then nothing is inserted.
    UPDATE {schema}.tenure_jobs AS j SET unique_holder = NULL
    FROM holder AS h, clock
    WHERE j.job_id = h.job_id AND NOT h.holds
      AND j.unique_holder = %(unique_key)s
      AND j.state NOT IN ('ready', 'leased')
      AND (j.unique_for IS NULL OR j.updated_at + j.unique_for <= clock.now)
    RETURNING j.job_id
),
applied AS (
    INSERT INTO {schema}.tenure_jobs AS j
        (job_id, queue, state, generation, available_at, attempts, max_attempts, payload,
         created_at, updated_at, priority, timeout,
         unique_key, unique_for, unique_holder, headers)
    SELECT %(job_id)s, %(queue)s, 'ready', 0, clock.now + %(delay)s::float8, 0,
           %(max_attempts)s::integer, %(payload)s::text, clock.now, clock.now,
           %(priority)s::integer, %(timeout)s::float8,
           %(unique_key)s::text, %(unique_for)s::float8, %(unique_key)s::text,
           %(headers)s::text
    FROM clock
    -- Reading released here also runs its UPDATE before this INSERT.
    WHERE NOT EXISTS (SELECT FROM existing)
      AND NOT EXISTS (SELECT FROM holder WHERE holds)
      AND (NOT EXISTS (SELECT FROM holder) OR EXISTS (SELECT FROM released))
    ON CONFLICT DO NOTHING
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
)
SELECT 'applied' AS status, a.*, clock.now FROM applied AS a, clock
UNION ALL
SELECT 'missed', j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now
FROM {schema}.tenure_jobs AS j, clock
WHERE j.job_id = %(job_id)s AND NOT EXISTS (SELECT FROM applied)
UNION ALL
SELECT 'missed', j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now
FROM holder AS h JOIN {schema}.tenure_jobs AS j ON j.job_id = h.job_id, clock
WHERE h.holds AND NOT EXISTS (SELECT FROM applied)
