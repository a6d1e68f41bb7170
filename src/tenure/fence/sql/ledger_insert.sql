-- Record that an effect was applied by a generation (no row changed: already recorded).
-- Runs after the fence row was advanced in the same transaction, which serialises the
-- effects of one job. Placeholders: job id, effect key, generation.
INSERT INTO tenure_effects (job_id, effect_key, generation, applied_at)
VALUES (?, ?, ?, CURRENT_TIMESTAMP)
ON CONFLICT (job_id, effect_key) DO NOTHING
