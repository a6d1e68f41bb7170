-- now: the store's time. Raises the floor, like a write: a time once reported is never
-- undercut later, even if the clock is stepped back before the next write.
-- KEYS: clock
-- ARGV: now override
return fmt(store_now(KEYS[1], ARGV[1], true))
