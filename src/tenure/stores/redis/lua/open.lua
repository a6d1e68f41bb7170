-- open: give a new store its id and layout version, or answer those of an existing one;
-- then, unless its layout is newer than this driver's (the driver refuses it, and nothing is
-- written to it here), its identity (store_identity): its clock key made sure of, and a
-- layout-1 store marked layout 2, which moving its clock makes it. An older store becomes
-- the current layout once its leases are indexed (index_leases.lua, then identity.lua).
-- One script, so that opening a store is one round trip.
-- KEYS: meta, the layout-1 clock (the store id's clock is that key, ':' and the id)
-- ARGV: a fresh store id, this driver's layout version
-- Reply: the store id, its layout version as found
redis.call('HSETNX', KEYS[1], 'store_id', ARGV[1])
redis.call('HSETNX', KEYS[1], 'layout', ARGV[2])
local found = redis.call('HMGET', KEYS[1], 'store_id', 'layout')
local mine = tonumber(ARGV[2])
if tonumber(found[2]) <= mine then
  store_identity(KEYS[1], KEYS[2] .. ':' .. found[1], KEYS[2], mine - 1)
end
return found
