-- tenure schema, version 10 (issue #20): a job's headers, such as the W3C trace context of
-- the request that submitted it, as a JSON object of str to str (checked by the store API).
-- NULL: none (every job of an older schema). No index: nothing selects by them.
ALTER TABLE tenure_jobs ADD COLUMN headers TEXT;
