-- One row when the effect ledger exists.
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tenure_effects'
