-- cancel: a job in the states taken (ready, leased) becomes cancelled with the reason as its
-- error (cancel.sql); a leased one's generation moves on, so its holder's token is stale.
-- KEYS: job, clock
-- ARGV: now override, reason, then the states taken
local job = KEYS[1]
local now = store_now(KEYS[2], ARGV[1], true)
if redis.call('EXISTS', job) == 0 then
  return { 'missing', fmt(now) }
end
local f = redis.call('HMGET', job, 's', 'g', 'z', 'k')
if not takes(f[1], 3) then
  return answer('missed', now, job)
end
if f[1] == 'leased' then
  attempt_end(job, 'cancelled', ARGV[2], now)
  if below_max(f[2]) then
    redis.call('HINCRBY', job, 'g', 1)
  end
end
local now_s = fmt(now)
redis.call('HSET', job, 's', 'cancelled', 'e', ARGV[2], 'av', now_s, 'u', now_s)
redis.call('HDEL', job, 'h', 'lu')
redis.call('ZREM', f[3], f[4])
if f[1] == 'leased' then
  lease_clear(f[3], f[4])
end
ended(job) -- wakes its store.wait callers, if any
return answer('applied', now, job)
