-- The job holding :unique_key (at most one, by tenure_jobs_unique) and whether it still
-- holds it at :now: unfinished, or finished (updated_at: when) less than its own
-- unique_for ago. A holder that no longer holds is released (unique_release.sql) by the
-- submit that takes the key over.
SELECT job_id, queue, state, owner, generation, secret_hash, lease_until, available_at, attempts, max_attempts, payload, result, error, created_at, updated_at, priority, timeout, unique_key, headers,
    state IN ('ready', 'leased')
        OR (unique_for IS NOT NULL AND updated_at + unique_for > :now) AS holds
FROM tenure_jobs
WHERE unique_holder = :unique_key
