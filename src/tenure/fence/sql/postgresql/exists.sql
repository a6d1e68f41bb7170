-- One row when the fence table exists on the search path.
SELECT 1 WHERE to_regclass('tenure_fence') IS NOT NULL
