-- The job of each id of a batch (a JSON array of strings), in the batch's order.
SELECT j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
FROM json_each(:ids) AS i JOIN tenure_jobs AS j ON j.job_id = i.value
ORDER BY i.key
