-- renew: extend the current lease to now + ttl by store time (renew.sql).
-- KEYS: job, clock
-- ARGV: now override, owner, generation, secret hash, ttl
local job = KEYS[1]
local ttl = ttl_arg(ARGV[5])
local now = store_now(KEYS[2], ARGV[1], true)
if redis.call('EXISTS', job) == 0 then
  return { 'missing', fmt(now) }
end
local candidates, member = held(job, ARGV[2], ARGV[3], ARGV[4], now)
if not candidates then
  return answer('missed', now, job)
end
local lease_until = fmt(now + ttl)
redis.call('HSET', job, 'lu', lease_until, 'av', lease_until, 'u', fmt(now))
redis.call('ZADD', candidates, lease_until, member)
lease_mark(candidates, member, lease_until)
return answer('applied', now, job)
