-- One row when the effect ledger exists on the search path.
SELECT 1 WHERE to_regclass('tenure_effects') IS NOT NULL
