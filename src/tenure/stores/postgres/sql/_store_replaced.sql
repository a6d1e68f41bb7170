-- What a statement evaluates when _same_store.sql is not true: plain SQL cannot raise an
-- error of its own, so this is a cast that fails, with words the driver recognises
-- (STORE_REPLACED in _common.py). Volatile (clock_timestamp()), so the planner never
-- evaluates it ahead of the check.
('tenure store replaced: not the tables this client opened, at ' || clock_timestamp()::text)::float8
