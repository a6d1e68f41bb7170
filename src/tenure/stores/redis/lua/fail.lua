-- fail: a failed attempt; ready again at now + retry_in, or dead when the attempts are used
-- up (fail.sql).
-- KEYS: job, clock
-- ARGV: now override, owner, generation, secret hash, receipt, error, retry in
local job = KEYS[1]
local retry_in = delay_arg('retry_in', ARGV[7])
local now = store_now(KEYS[2], ARGV[1], true)
if redis.call('EXISTS', job) == 0 then
  return { 'missing', fmt(now) }
end
local candidates, member, wake_key = held(job, ARGV[2], ARGV[3], ARGV[4], now)
if not candidates then
  return answer('missed', now, job)
end
local f = redis.call('HMGET', job, 'a', 'm')
local available = now + retry_in
local available_s = fmt(available)
local state = 'ready'
if tonumber(f[1]) >= tonumber(f[2]) then
  state = 'dead'
end
redis.call('HSET', job, 's', state, 'h', ARGV[5], 'av', available_s, 'e', ARGV[6], 'u', fmt(now))
redis.call('HDEL', job, 'lu')
lease_clear(candidates, member)
attempt_end(job, 'failed', ARGV[6], now)
if state == 'dead' then
  redis.call('ZREM', candidates, member)
  ended(job)
else
  redis.call('ZADD', candidates, available_s, member)
  if available <= now then
    wake(wake_key)
  end
end
return answer('applied', now, job)
