-- tenure schema, version 10 (issue #20): a job's headers, such as the W3C trace context of
-- the request that submitted it, as a JSON object of str to str (checked by the store API).
-- NULL: none (every job of an older schema). Adding a nullable column without a default
-- changes only the catalog: no table rewrite, and the ALTER holds its lock for an instant.
-- No index: nothing selects by them, and renewals stay HOT (a renewal never writes them;
-- they are written once, by the submit).
ALTER TABLE {schema}.tenure_jobs ADD COLUMN headers text;
