-- The highest generation accepted for one job (no row: none yet).
SELECT generation FROM tenure_fence WHERE job_id = ?
