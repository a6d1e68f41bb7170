-- tenure schema, version 7 (issue #18): unique jobs. unique_key and unique_for are what the
-- job was submitted with (NULL: none); unique_holder is the key while this job holds it and
-- NULL once a later submit took the key over (the job keeps unique_key for its snapshots).
-- The partial unique index admits one holder per key, so that two submits of one key
-- racing each other create one job (the loser's INSERT ... ON CONFLICT DO NOTHING waits for
-- the winner and inserts nothing). Jobs without a key are not in it (NULL), and no claim,
-- renew or complete changes unique_holder: their updates stay as HOT as they were. Adding
-- nullable columns without a default rewrites nothing.
ALTER TABLE {schema}.tenure_jobs
    ADD COLUMN unique_key    text COLLATE "C",
    ADD COLUMN unique_for    double precision,
    ADD COLUMN unique_holder text COLLATE "C";
CREATE UNIQUE INDEX tenure_jobs_unique
    ON {schema}.tenure_jobs (unique_holder)
    WHERE unique_holder IS NOT NULL;
