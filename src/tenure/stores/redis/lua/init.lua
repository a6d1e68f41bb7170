-- init: give a new store its id and layout version; answer those of an existing one.
-- KEYS: meta
-- ARGV: a fresh store id, this driver's layout version
redis.call('HSETNX', KEYS[1], 'store_id', ARGV[1])
redis.call('HSETNX', KEYS[1], 'layout', ARGV[2])
return redis.call('HMGET', KEYS[1], 'store_id', 'layout')
