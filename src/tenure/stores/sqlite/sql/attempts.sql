-- The attempts of one job, oldest first: the ended ones (tenure_attempts) and the lease in
-- progress (the job's row, while leased), the newest 100 of them.
SELECT generation, owner, started_at, ended_at, ending, error FROM (
    SELECT generation, owner, started_at, ended_at, ending, error
    FROM tenure_attempts
    WHERE job_id = :job_id
    UNION ALL
    SELECT generation, owner, coalesce(claimed_at, updated_at), NULL, NULL, NULL
    FROM tenure_jobs
    WHERE job_id = :job_id AND state = 'leased'
    ORDER BY generation DESC
    LIMIT 100
)
ORDER BY generation
