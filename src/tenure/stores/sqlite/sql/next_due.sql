-- When the next job of one queue becomes claimable (NULL when the queue has none pending).
-- Fleet-wide queue rates (migration 0011): a rate-limited queue without a whole token falls
-- due no sooner than its next token (rate_tokens reaches 1 at rate_at + (1 - rate_tokens) /
-- rate_per_second), so an idle worker sleeps until then rather than ask again and again.
-- Read from the claim's two indexes (migration 0012), never from the finished jobs: the
-- first lease end from the start of tenure_jobs_leased (queue, available_at), and the first
-- ready job of each priority from the head of its level in tenure_jobs_ready (queue,
-- priority DESC, available_at, seq), the levels visited one seek each (`levels`), so a
-- backlog of scheduled jobs costs a seek per priority, not a read of every job.
WITH RECURSIVE levels(priority) AS (
    SELECT max(priority) FROM tenure_jobs INDEXED BY tenure_jobs_ready
    WHERE queue = :queue AND state = 'ready'
    UNION ALL
    SELECT (SELECT max(j.priority) FROM tenure_jobs AS j INDEXED BY tenure_jobs_ready
            WHERE j.queue = :queue AND j.state = 'ready' AND j.priority < levels.priority)
    FROM levels
    WHERE levels.priority IS NOT NULL
),
-- Queue limits (issue #18): a limited queue with no room falls due when its first running
-- lease ends (a leased job's available_at is its lease's end).
room(open) AS (
    SELECT NOT EXISTS (
        SELECT 1 FROM tenure_queues AS l
        WHERE l.queue = :queue
          AND l.max_leased <= (SELECT count(*) FROM tenure_jobs INDEXED BY tenure_jobs_leased
                               WHERE queue = :queue AND state = 'leased'
                                 AND available_at > :now))
),
due(available_at) AS (
    SELECT (SELECT min(r.available_at) FROM tenure_jobs AS r INDEXED BY tenure_jobs_ready
            WHERE r.queue = :queue AND r.state = 'ready' AND r.priority = levels.priority
              AND r.generation < :max_generation)
    FROM levels, room
    WHERE levels.priority IS NOT NULL AND room.open
    UNION ALL
    SELECT (SELECT min(e.available_at) FROM tenure_jobs AS e INDEXED BY tenure_jobs_leased
            WHERE e.queue = :queue AND e.state = 'leased' AND e.generation < :max_generation
              AND (e.available_at > :now OR room.open))
    FROM room
)
SELECT max(d.available_at, coalesce((
    SELECT q.rate_at + (1 - q.rate_tokens) / q.rate_per_second
    FROM tenure_queues AS q
    WHERE q.queue = :queue AND q.rate_per_second IS NOT NULL
      AND q.rate_tokens + (max(0, :now - q.rate_at) + 1e-5) * q.rate_per_second < 1
), d.available_at))
FROM (SELECT min(available_at) AS available_at FROM due) AS d
WHERE d.available_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM tenure_queues WHERE queue = :queue AND paused)
