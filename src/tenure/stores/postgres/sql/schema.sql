-- tenure schema, current version: what a fresh install runs. Upgrades run migrations/NNNN_*.sql;
-- tests/postgres/test_migrations.py proves both end in the same catalog.
CREATE TABLE {schema}.tenure_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO {schema}.tenure_meta (key, value)
VALUES ('store_id', replace(gen_random_uuid()::text, '-', ''));

-- The floor of store time when a store_clock stands in for the server's clock (the
-- conformance suite's deterministic clock): that time never runs backwards. Production
-- uses the server's clock_timestamp() and never touches this row.
CREATE TABLE {schema}.tenure_clock (
    id    integer PRIMARY KEY CHECK (id = 0),
    floor double precision NOT NULL
);
INSERT INTO {schema}.tenure_clock (id, floor) VALUES (0, '-infinity');

CREATE TABLE {schema}.tenure_jobs (
    job_id       text COLLATE "C" PRIMARY KEY,
    -- Submission order, the FIFO tie-break.
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    queue        text COLLATE "C" NOT NULL,
    state        text NOT NULL CHECK (state IN ('ready', 'leased', 'done', 'dead', 'cancelled')),
    owner        text,
    generation   bigint NOT NULL DEFAULT 0 CHECK (generation >= 0),
    secret_hash  text,
    -- Times are seconds since the epoch by the store's clock (clock_timestamp()).
    lease_until  double precision,
    -- When the job can next be claimed: its run time when ready, its lease's end when leased.
    available_at double precision NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    payload      text,
    result       text,
    error        text,
    created_at   double precision NOT NULL,
    updated_at   double precision NOT NULL,
    -- Unique jobs (issue #18, migration 0007): the key and window the job was submitted
    -- with, and the key again while this job holds it (tenure_jobs_unique; see
    -- submit_unique.sql).
    unique_key    text COLLATE "C",
    unique_for    double precision,
    unique_holder text COLLATE "C",
    -- Issue #18 (migration 0008): claims take the highest priority first; a job's own
    -- per-attempt timeout (seconds; NULL: its handler's).
    priority     integer NOT NULL DEFAULT 0,
    timeout      double precision CHECK (timeout > 0),
    -- A ready job's run time and a finished job's end time, NULL otherwise: what the claim
    -- and purge indexes hold instead of available_at and updated_at, which every renewal
    -- changes (an update that changes an indexed column cannot be HOT). A renewal runs on a
    -- leased job only, so it leaves both NULL: unchanged.
    run_at       double precision
        GENERATED ALWAYS AS (CASE WHEN state = 'ready' THEN available_at END) STORED,
    finished_at  double precision
        GENERATED ALWAYS AS (CASE WHEN state IN ('done', 'dead', 'cancelled') THEN updated_at END)
        STORED,
    -- Issue #20 (migration 0010): the job's headers (a JSON object of str to str, such as
    -- the W3C trace context of its submit; NULL: none). Written once, by the submit; in no
    -- index, so renewals stay HOT.
    headers      text,
    -- Issue #19 (migration 0013): the earliest end the current lease was ever given (a
    -- claim sets it, a renewal lowers it only to a sooner end, so an ordinary renewal
    -- leaves it and stays HOT). The lease cannot have run out before it: the expired-lease
    -- path of a claim walks tenure_jobs_leased by it and stops at the first one still
    -- ahead. Meaningful while leased; left as it was when the lease ends.
    lease_min_end double precision,
    -- Without it a leased job would never be found expired by a claim's pick: a writer
    -- that forgets it fails instead.
    CONSTRAINT tenure_jobs_lease_min_end_check
        CHECK (state <> 'leased' OR lease_min_end IS NOT NULL)
) WITH (fillfactor = 85);  -- room on each page for a renewed row's new version (HOT)

-- The claim pick's two paths (_claim_next_ctes.sql). Ready jobs, highest priority first
-- then oldest: the pick walks one queue's range from its start, O(log n) whatever the
-- backlog; a claim moves its job out (it changes state), a renewal touches no column here.
CREATE INDEX tenure_jobs_queued
    ON {schema}.tenure_jobs (queue, priority DESC, run_at, seq)
    WHERE state = 'ready';
-- Leased jobs by queue and the earliest their lease can end: the expired-lease path reads
-- only the leases that may have run out (lease_min_end <= now), not every lease held. The
-- lease's end itself is not in the key: renewals change it, and a renewal stays HOT
-- (lease_min_end moves only when a renewal shortens a lease). "lease_min_end IS NOT NULL"
-- is always true of a leased job (the check above); only statements that say it (or
-- compare lease_min_end) can use the index: a renew or complete of one job (state =
-- 'leased' and its id) would otherwise take it in a generic plan made while few leases
-- were held, and scan every lease once many are. Until migration 0014 the predicate said
-- "seq > 0", which tenure_jobs_by_seq can answer too: with statistics that said the table
-- was empty, the pick walked that index, every job of the table, at each claim.
CREATE INDEX tenure_jobs_leased
    ON {schema}.tenure_jobs (queue, lease_min_end)
    WHERE state = 'leased' AND lease_min_end IS NOT NULL;

-- The generation floor: the highest generation of any job deleted or purged. A claim takes
-- greatest(generation, floor) + 1, so a job id submitted again after its job was deleted
-- never gets a token the deleted job had.
CREATE TABLE {schema}.tenure_floor (
    id         integer PRIMARY KEY CHECK (id = 0),
    generation bigint NOT NULL CHECK (generation >= 0)
);
INSERT INTO {schema}.tenure_floor (id, generation) VALUES (0, 0);

-- purge.sql walks this index, oldest finished job first. Keyed on finished_at, not
-- updated_at, which every renewal changes (the update could not be HOT).
CREATE INDEX tenure_jobs_finished
    ON {schema}.tenure_jobs (finished_at)
    WHERE state IN ('done', 'dead', 'cancelled');

-- Idle workers LISTEN on "tenure_<schema>"; a job that becomes ready (submitted, released,
-- failed with a retry) notifies its queue's name. Any writer is covered, SQL ones included.
CREATE FUNCTION {schema}.tenure_notify_ready() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tenure_' || TG_TABLE_SCHEMA, NEW.queue);
    RETURN NULL;
END
$$;

CREATE TRIGGER tenure_jobs_ready
    AFTER INSERT OR UPDATE OF state, available_at ON {schema}.tenure_jobs
    FOR EACH ROW WHEN (NEW.state = 'ready')
    EXECUTE FUNCTION {schema}.tenure_notify_ready();

-- Listing pages walk submission order from a cursor (list_page.sql). seq never changes, so
-- this index costs nothing on a HOT update (a renewal); a claim or a settle, which change
-- state, add one more index entry here: measured in docs/benchmarks.md.
CREATE INDEX tenure_jobs_by_seq ON {schema}.tenure_jobs (seq);

-- store.wait registers in tenure_waiters and LISTENs on "tenure_end_<schema>"; a job that
-- finishes (done, dead, or any final state: whatever is neither ready nor leased) notifies
-- its id (the trigger tenure_jobs_updated, below), only when someone waits for it: a
-- notification serialises its transaction's commit with every other notifying commit of
-- the cluster, so completions send none unless waited for. Any writer is covered
-- (complete, fail, a claim that buries, SQL of the user's own). `until`: when a waiter
-- that vanished stops counting (server time).
CREATE TABLE {schema}.tenure_waiters (
    waiter text PRIMARY KEY,
    job_id text COLLATE "C" NOT NULL,
    until  double precision NOT NULL
);
CREATE INDEX tenure_waiters_job ON {schema}.tenure_waiters (job_id);

-- The attempt history (issue #17). Each claim of a job starts an attempt (its generation,
-- owner and store time); the end of that lease ends it. Written by a trigger on
-- tenure_jobs, so an attempt changes in the very statement that changes its job, whatever
-- statement that is (claim, claim_next, complete_and_claim, complete_many, fail, release,
-- cancel, a caller's transaction), at the store time it wrote (updated_at). delete.sql and
-- purge.sql remove a job's history with it, in their statement (a foreign key would do it
-- too, but its check on every claim's insert cost more than the rest of the history).
CREATE TABLE {schema}.tenure_attempts (
    job_id     text COLLATE "C" NOT NULL,
    generation bigint NOT NULL,
    owner      text NOT NULL,
    started_at double precision NOT NULL,
    ended_at   double precision,
    ending     text
        CHECK (ending IN ('completed', 'failed', 'released', 'cancelled', 'lost', 'dead')),
    error      text,
    PRIMARY KEY (job_id, generation)
);

-- After every UPDATE statement on tenure_jobs, over its old rows (a transition table) and
-- their new versions, two things that must happen in the statement that changes a job, whoever wrote
-- it (claim, settle, cancel, a caller's own SQL):
--
-- * The attempt history. A lease ends when its job leaves the leased state, or when a
--   claim takes the job at a newer generation after it expired (lost). How it ended
--   follows from the update: done is completed; cancelled; dead with its secret hash
--   cleared is a burial, otherwise a fail; ready with the attempt refunded is a release,
--   otherwise a fail. A claim starts the next attempt, and drops the oldest beyond the
--   newest 100 of the job (tenure.models.ATTEMPTS_KEPT): a job retried forever keeps a
--   bounded history.
-- * A job that finishes (done, dead, or any final state: neither ready nor leased)
--   notifies its id on "tenure_end_<schema>", only when someone waits for it (see
--   tenure_waiters).
--
-- Once per statement, not once per row (migration 0012): a batch of 10 completions and 10
-- claims is one call, where triggers per row made 30, each with statements of its own (a
-- fifth to a third of the server's CPU per job along complete_and_claim, benchmarks.md
-- "Attempt history"). A job's row is updated at most once per statement, so job_id pairs
-- an old row with its new one: the row in the table now.
--
-- Its statements probe tenure_attempts by primary key, whatever the planner believes of
-- that table (migration 0014). A plan is cached for the session at a statement's first run,
-- costed from the table's statistics; after a purge empties the history and (auto)vacuum or
-- analyze records it empty, a plan made then scans the whole history at every claim and
-- completion until the next analyze: claims at a fifth of their speed
-- (benchmarks.md "The attempt history's plans"). So the function turns sequential scans
-- off for its own statements (SET below: only while it runs), and finds each ended attempt
-- by a primary-key probe per ended lease.
--
-- Those plans are also made for the size of the first statement, usually a few rows: a
-- join of the old and new transition tables planned then read one once per row of the
-- other, for a batch of 1,000 a million rows. Since migration 0015 each old row's new
-- version is read by a primary-key probe of its own (the function needs no NEW TABLE).
CREATE FUNCTION {schema}.tenure_jobs_updated() RETURNS trigger
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    trimmed text[];
    trimmed_job text;
BEGIN
    -- Each job's new row is its row in the table now: a statement updates a row once, and
    -- no other writer can change it before this statement's transaction ends. It is read by
    -- primary key, a probe per old row (LATERAL ... OFFSET 0: a loop over the old rows, as
    -- a join of the two transition tables need not be), so that a statement of one row
    -- costs one probe and one of 1,000 a thousand, whatever plan the session made first.
    -- Most statements change no job's state or generation (renewals, above all): they
    -- stop here.
    IF NOT EXISTS (
        SELECT FROM tenure_old AS o
        CROSS JOIN LATERAL (
            SELECT j.state, j.generation FROM {schema}.tenure_jobs AS j
            WHERE j.job_id = o.job_id OFFSET 0
        ) AS n
        WHERE (o.state <> n.state OR o.generation <> n.generation)
          AND (o.state = 'leased' OR n.state <> 'ready')
    ) THEN
        RETURN NULL;
    END IF;
    WITH changed AS MATERIALIZED (
        SELECT o.job_id, o.state AS old_state, o.generation AS old_generation,
               n.state, n.generation, n.owner, n.updated_at, n.secret_hash, n.error,
               n.state = 'ready' AND n.attempts < o.attempts AS released
        FROM tenure_old AS o
        CROSS JOIN LATERAL (
            SELECT j.state, j.generation, j.owner, j.updated_at, j.secret_hash, j.error,
                   j.attempts
            FROM {schema}.tenure_jobs AS j
            WHERE j.job_id = o.job_id OFFSET 0
        ) AS n
        WHERE (o.state = 'leased' OR n.state = 'leased')
          AND (o.state <> n.state OR o.generation <> n.generation)
    ),
    -- The open attempt of each lease that ended, found by primary key (a subquery run
    -- once per changed job: unlike a join, never planned as a read of the whole history)
    -- and updated by its row's address.
    ending AS MATERIALIZED (
        SELECT c.job_id, c.state, c.updated_at, c.secret_hash, c.error, c.released,
               (SELECT t.ctid FROM {schema}.tenure_attempts AS t
                WHERE t.job_id = c.job_id AND t.generation = c.old_generation
                  AND t.ended_at IS NULL) AS row_id
        FROM changed AS c
        WHERE c.old_state = 'leased'
    ),
    ended AS (
        UPDATE {schema}.tenure_attempts AS t
        SET ended_at = c.updated_at,
            ending = CASE
                WHEN c.state = 'leased' THEN 'lost'
                WHEN c.state = 'done' THEN 'completed'
                WHEN c.state = 'cancelled' THEN 'cancelled'
                WHEN c.state = 'dead' AND c.secret_hash IS NULL THEN 'dead'
                WHEN c.released THEN 'released'
                ELSE 'failed' END,
            error = CASE WHEN c.state IN ('cancelled', 'ready', 'dead') AND NOT c.released
                         THEN c.error END
        FROM ending AS c
        WHERE t.ctid = c.row_id
    ),
    started AS (
        INSERT INTO {schema}.tenure_attempts (job_id, generation, owner, started_at)
        SELECT c.job_id, c.generation, c.owner, c.updated_at
        FROM changed AS c
        WHERE c.state = 'leased' AND c.generation <> c.old_generation
    )
    -- More than 100 attempts only if one is 100 generations old (generations are
    -- distinct): only a claim past generation 100 may have some to drop.
    SELECT array_agg(c.job_id) INTO trimmed
    FROM changed AS c
    WHERE c.state = 'leased' AND c.generation <> c.old_generation AND c.generation > 100;
    -- A statement of its own, so it sees the attempt started above: the newest 100 stay.
    FOREACH trimmed_job IN ARRAY coalesce(trimmed, '{}') LOOP
        DELETE FROM {schema}.tenure_attempts AS t
        WHERE t.job_id = trimmed_job
          AND t.generation <= (SELECT o.generation FROM {schema}.tenure_attempts AS o
                               WHERE o.job_id = trimmed_job
                               ORDER BY o.generation DESC OFFSET 100 LIMIT 1);
    END LOOP;
    PERFORM pg_notify('tenure_end_' || TG_TABLE_SCHEMA, o.job_id)
    FROM tenure_old AS o
    CROSS JOIN LATERAL (
        SELECT j.state FROM {schema}.tenure_jobs AS j WHERE j.job_id = o.job_id OFFSET 0
    ) AS n
    WHERE n.state NOT IN ('ready', 'leased') AND o.state <> n.state
      AND EXISTS (SELECT FROM {schema}.tenure_waiters AS w WHERE w.job_id = o.job_id);
    RETURN NULL;
END
$$;

-- A trigger with transition tables cannot name columns: every UPDATE runs it.
CREATE TRIGGER tenure_jobs_updated
    AFTER UPDATE ON {schema}.tenure_jobs
    REFERENCING OLD TABLE AS tenure_old
    FOR EACH STATEMENT
    EXECUTE FUNCTION {schema}.tenure_jobs_updated();

-- Paused queues (issue #18). A queue is paused while its row here says so; claim_next and
-- complete_and_claim leave its jobs alone (a NOT EXISTS on this small table per queue asked,
-- before the walks of tenure_jobs_queued and tenure_jobs_leased), claim of a named job still takes it, and
-- leases already held go on. No row: not paused.
CREATE TABLE {schema}.tenure_queues (
    queue  text COLLATE "C" PRIMARY KEY,
    paused boolean NOT NULL,
    -- Fleet-wide queue limits (issue #18): at most this many running leases of the queue at
    -- once, for every client (_queue_room.sql). NULL: no limit.
    max_leased integer CHECK (max_leased >= 1),
    -- Fleet-wide queue rates (migration 0011): a token bucket of at most rate_burst
    -- tokens, refilled at rate_per_second a second by store time; rate_tokens is what it
    -- held at rate_at (-infinity: full). Each lease granted spends one (_queue_room.sql).
    -- NULL: no rate.
    rate_per_second double precision CHECK (rate_per_second > 0),
    rate_burst integer CHECK (rate_burst >= 1),
    rate_tokens double precision,
    rate_at double precision
);

-- The room of the limited and rate-limited queues among p_queues (see _queue_room.sql):
-- for each queue with a max_leased or a rate_per_second, how many more of its jobs the
-- claim may lease at now: max_leased minus its leases running at now (the jobs of
-- p_settled not counted), and the whole tokens its bucket holds at now, the smaller of
-- the two, never below 0; that now, the time the claim's leases of the queue start; and
-- the bucket's tokens at now (NULL without a rate), which the claim debits by the leases
-- it grants (_claim_next_ctes.sql's "spent"). Two statements, on purpose: the first locks
-- the queues' rows (in name order, so claims asking several limited queues cannot
-- deadlock); the second counts in a snapshot of its own, taken after the lock was granted
-- (a VOLATILE function takes one per statement under READ COMMITTED), so it reads the
-- bucket as the claim before it left it. PL/pgSQL rather than SQL: its plans are kept
-- across calls. Counted in the statement's snapshot instead, the count would miss the
-- leases of a claim it waited for. The time is read after that snapshot too (the server's
-- clock, or p_now when the test hook gives the time, p_test_now): the statement's own time
-- was read before its wait, and a lease ended meanwhile would look running to the store's
-- history at the start of the new one. The count walks the queue's leases in
-- tenure_jobs_leased (as many as are held, not the backlog). The bucket refills at
-- rate_per_second from rate_at (-infinity: full), up to rate_burst; a token due within
-- 1e-5 s counts as there, forgiving the rounding of store times (doubles of epoch seconds
-- step by 2.4e-7 s), so a wait that ends when the next token is due (next_due.sql) finds it.
CREATE FUNCTION {schema}.tenure_queue_room(
    p_queues text[], p_now double precision, p_test_now double precision, p_settled text[]
) RETURNS TABLE (queue text, room bigint, now double precision, tokens double precision)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    PERFORM FROM {schema}.tenure_queues AS q
    WHERE q.queue = ANY (p_queues)
      AND (q.max_leased IS NOT NULL OR q.rate_per_second IS NOT NULL)
    ORDER BY q.queue
    FOR NO KEY UPDATE;
    -- The time is read inside this query, so after its snapshot: a lease settled before
    -- the snapshot (and so not counted) ended at a time read before its commit, before it.
    RETURN QUERY
    SELECT b.queue,
           greatest(least(b.places, floor(b.tokens + 1e-5 * b.rate)::bigint), 0)::bigint,
           b.now, b.tokens
    FROM (
        SELECT q.queue, t.now,
               CASE WHEN q.max_leased IS NOT NULL THEN q.max_leased - (
                   SELECT count(*) FROM {schema}.tenure_jobs AS j
                   WHERE j.queue = q.queue
                     AND j.state = 'leased'
                     AND j.lease_min_end IS NOT NULL  -- the predicate of tenure_jobs_leased (schema.sql says why)
                     AND j.lease_until > t.now
                     AND j.job_id <> ALL (p_settled)
               ) END AS places,
               q.rate_per_second AS rate,
               least(q.rate_burst::float8,
                     q.rate_tokens + greatest(t.now - q.rate_at, 0) * q.rate_per_second)
                   AS tokens
        FROM (SELECT CASE WHEN p_test_now IS NULL
                          THEN greatest(p_now, extract(epoch FROM clock_timestamp())::float8)
                          ELSE p_now END AS now) AS t
        CROSS JOIN {schema}.tenure_queues AS q
        WHERE q.queue = ANY (p_queues)
          AND (q.max_leased IS NOT NULL OR q.rate_per_second IS NOT NULL)
    ) AS b;
END
$$;

-- Store schedules (issue #18, `tenure schedules`): periodic jobs every worker serving the
-- queue runs as its own @worker.periodic ones. Times are store time.
CREATE TABLE {schema}.tenure_schedules (
    name         text COLLATE "C" PRIMARY KEY,
    cron         text NOT NULL,
    queue        text NOT NULL,
    payload      text,
    timezone     text NOT NULL,
    catch_up     text NOT NULL CHECK (catch_up IN ('skip', 'once')),
    max_attempts integer NOT NULL,
    created_at   double precision NOT NULL,
    updated_at   double precision NOT NULL
);

-- One holder per unique key (issue #18; see migrations/0007_unique_jobs.sql).
CREATE UNIQUE INDEX tenure_jobs_unique
    ON {schema}.tenure_jobs (unique_holder)
    WHERE unique_holder IS NOT NULL;
