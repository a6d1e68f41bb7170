-- One page of a listing: jobs after the cursor (a submission number, seq), oldest first,
-- optionally of one queue, state and owner, created at or before now - older_than. One
-- more row than the page is asked for (limit + 1) tells the driver whether a next page
-- exists. Walks tenure_jobs_by_seq (or tenure_jobs_queue_seq for one queue) from the
-- cursor: a page costs its rows plus the rows it skips, never a sort of the table.
-- One row with NULL job columns when there are none, so that the store time comes back.
{include:_read_clock}
SELECT clock.now, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, j.seq
FROM clock
LEFT JOIN LATERAL (
    SELECT *
    FROM {schema}.tenure_jobs AS t
    WHERE t.seq > %(after)s::bigint
      AND (%(queue)s::text IS NULL OR t.queue = %(queue)s::text)
      AND (%(state)s::text IS NULL OR t.state = %(state)s::text)
      AND (%(owner)s::text IS NULL OR t.owner = %(owner)s::text)
      AND (%(older_than)s::float8 IS NULL OR t.created_at <= clock.now - %(older_than)s::float8)
    ORDER BY t.seq
    LIMIT %(limit)s
) AS j ON true
ORDER BY j.seq
