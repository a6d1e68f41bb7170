-- One job and the store time it was read at (the job columns are NULL when it is missing).
{include:_read_clock}
SELECT clock.now, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
FROM clock LEFT JOIN {schema}.tenure_jobs AS j ON j.job_id = %(job_id)s
