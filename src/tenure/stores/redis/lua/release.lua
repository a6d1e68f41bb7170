-- release: give the job back, claimable now; the attempt is refunded (release.sql).
-- KEYS: job, clock
-- ARGV: now override, owner, generation, secret hash, receipt
local job = KEYS[1]
local now = store_now(KEYS[2], ARGV[1], true)
if redis.call('EXISTS', job) == 0 then
  return { 'missing', fmt(now) }
end
local candidates, member, wake_key = held(job, ARGV[2], ARGV[3], ARGV[4], now)
if not candidates then
  return answer('missed', now, job)
end
local now_s = fmt(now)
redis.call('HSET', job, 's', 'ready', 'h', ARGV[5], 'av', now_s, 'u', now_s)
redis.call('HDEL', job, 'lu')
redis.call('HINCRBY', job, 'a', -1)
attempt_end(job, 'released', nil, now)
redis.call('ZADD', candidates, now_s, member)
lease_clear(candidates, member)
wake(wake_key)
return answer('applied', now, job)
