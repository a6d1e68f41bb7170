-- The generation that applied an effect (no row: not applied). Placeholders: job id, key.
SELECT generation FROM tenure_effects WHERE job_id = ? AND effect_key = ?
