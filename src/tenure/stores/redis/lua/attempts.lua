-- attempts: the job's attempt history, oldest first (see attempt_start in _lib.lua).
-- KEYS: job
-- ARGV: none
-- Reply: the list's JSON entries as they are stored.
return redis.call('LRANGE', KEYS[1] .. ':att', 0, -1)
