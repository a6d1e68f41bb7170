-- In the claims' "clock" CTE (see _same_store.sql): the store id's row is the row version
-- the client read when it opened the store; a data-only restore writes it again. One probe
-- of a two-row table, 6-12 us on a claim_next: so only where generations are issued.
(SELECT m.xmin = {id_xmin}::xid FROM {schema}.tenure_meta AS m WHERE m.key = 'store_id')
