-- complete: the job is done (complete.sql). The secret hash stays, so that a repeated
-- complete by the same lease is recognised as a repeat.
-- KEYS: job, clock
-- ARGV: now override, owner, generation, secret hash, result, has result
local job = KEYS[1]
local now = store_now(KEYS[2], ARGV[1], true)
if redis.call('EXISTS', job) == 0 then
  return { 'missing', fmt(now) }
end
local candidates, member = held(job, ARGV[2], ARGV[3], ARGV[4], now)
if not candidates then
  return answer('missed', now, job)
end
local now_s = fmt(now)
redis.call('HSET', job, 's', 'done', 'av', now_s, 'u', now_s)
redis.call('HDEL', job, 'lu')
if ARGV[6] == '1' then
  redis.call('HSET', job, 'r', ARGV[5])
else
  redis.call('HDEL', job, 'r')
end
redis.call('ZREM', candidates, member)
return answer('applied', now, job)
