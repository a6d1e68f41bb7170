-- A job gives up the key it held (its window is over): the submit taking the key runs this
-- first, in the same transaction.
UPDATE tenure_jobs SET unique_holder = NULL WHERE job_id = :job_id
