-- One row when the fence table exists.
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tenure_fence'
