-- Which ids of a batch (a JSON array of strings) are jobs already.
SELECT job_id FROM tenure_jobs WHERE job_id IN (SELECT value FROM json_each(:ids))
