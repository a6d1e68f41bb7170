-- identity: make sure the clock key of this store id exists (every script refuses to run
-- without it: see store_now), moving a layout-1 store's clock there; then mark the layout.
-- Run once an older store's leases are indexed (open.lua does the rest of an open).
-- KEYS: meta, the store id's clock, the layout-1 clock
-- ARGV: layout version
if redis.call('EXISTS', KEYS[2]) == 0 then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    redis.call('RENAME', KEYS[3], KEYS[2])
  else
    redis.call('SET', KEYS[2], '0')
  end
end
local layout = tonumber(redis.call('HGET', KEYS[1], 'layout') or '0')
if layout < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'layout', ARGV[1])
end
return 1
