-- tenure schema, version 7 (issue #18): unique jobs. unique_key and unique_for are what the
-- job was submitted with (NULL: none); unique_holder is the key while this job holds it and
-- NULL once a later submit took the key over (the job keeps unique_key for its snapshots).
-- The unique index admits one holder per key; jobs without a key are not in it (NULL).
ALTER TABLE tenure_jobs ADD COLUMN unique_key TEXT;
ALTER TABLE tenure_jobs ADD COLUMN unique_for REAL;
ALTER TABLE tenure_jobs ADD COLUMN unique_holder TEXT;
CREATE UNIQUE INDEX tenure_jobs_unique
    ON tenure_jobs (unique_holder)
    WHERE unique_holder IS NOT NULL;
