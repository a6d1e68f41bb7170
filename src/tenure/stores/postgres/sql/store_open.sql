-- Opening a store: its id, and what tells this copy of the store from another (see
-- _same_store.sql): "<oid of the jobs table> <xmin of the store id's row>", as it is now
-- and as recorded by the first client that opened it (recorded here when missing, so a
-- store restored from a dump of itself is told apart even by a client that never saw it).
WITH seen AS (
    SELECT m.value AS store_id,
           {jobs_table}::regclass::oid::text || ' ' || m.xmin::text AS identity
    FROM {schema}.tenure_meta AS m
    WHERE m.key = 'store_id'
),
recorded AS (
    INSERT INTO {schema}.tenure_meta (key, value)
    SELECT 'identity', s.identity FROM seen AS s
    ON CONFLICT (key) DO NOTHING
    RETURNING value
)
SELECT s.store_id, s.identity,
       -- Another client's row committed after this statement's snapshot: it recorded
       -- the same tables, seen now.
       coalesce(
           (SELECT r.value FROM recorded AS r),
           (SELECT m.value FROM {schema}.tenure_meta AS m WHERE m.key = 'identity'),
           s.identity
       ) AS recorded
FROM seen AS s
