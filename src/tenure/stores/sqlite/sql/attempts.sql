-- The attempts of one job, oldest first.
SELECT generation, owner, started_at, ended_at, ending, error
FROM tenure_attempts
WHERE job_id = :job_id
ORDER BY generation
