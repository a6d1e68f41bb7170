-- open: give a new store its id and layout version, or answer those of an existing one;
-- then, unless its layout is newer than this driver's (the driver refuses it, and nothing is
-- written to it here), make sure the clock key of its store id exists (every script refuses
-- to run without it: see store_now), moving a layout-1 store's clock there, and mark a
-- layout-1 store layout 2, which that move makes it. An older store becomes the current
-- layout once its leases are indexed (index_leases.lua, then identity.lua). One script, so
-- that opening a store is one round trip.
-- KEYS: meta, the layout-1 clock (the store id's clock is that key, ':' and the id)
-- ARGV: a fresh store id, this driver's layout version
-- Reply: the store id, its layout version as found
redis.call('HSETNX', KEYS[1], 'store_id', ARGV[1])
redis.call('HSETNX', KEYS[1], 'layout', ARGV[2])
local found = redis.call('HMGET', KEYS[1], 'store_id', 'layout')
local layout, mine = tonumber(found[2]), tonumber(ARGV[2])
if layout > mine then
  return found
end
local clock = KEYS[2] .. ':' .. found[1]
if redis.call('EXISTS', clock) == 0 then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('RENAME', KEYS[2], clock)
  else
    redis.call('SET', clock, '0')
  end
end
if layout < mine - 1 then
  redis.call('HSET', KEYS[1], 'layout', string.format('%d', mine - 1))
end
return found
