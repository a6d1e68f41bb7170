-- requeue: a job in the states taken (done, dead, cancelled) is ready again at now + delay
-- (requeue.sql): generation kept, attempts kept (one more if all were used) or reset,
-- result cleared.
-- KEYS: job, clock
-- ARGV: now override, delay, reset attempts ('1' or '0'), then the states taken
local job = KEYS[1]
local delay = delay_arg('delay', ARGV[2])
local now = store_now(KEYS[2], ARGV[1], true)
if redis.call('EXISTS', job) == 0 then
  return { 'missing', fmt(now) }
end
local f = redis.call('HMGET', job, 's', 'a', 'm', 'z', 'k', 'w', 'pr', 'q')
if not takes(f[1], 4) then
  return answer('missed', now, job)
end
local available = now + delay
local available_s = fmt(available)
redis.call('HSET', job, 's', 'ready', 'av', available_s, 'u', fmt(now))
redis.call('HDEL', job, 'h', 'lu', 'r')
if ARGV[3] == '1' then
  redis.call('HSET', job, 'a', '0')
elseif tonumber(f[2]) >= tonumber(f[3]) then
  redis.call('HSET', job, 'm', tostring(tonumber(f[2]) + 1))
end
redis.call('ZADD', f[4], available_s, f[5]) -- its priority's set: the priority is kept
register_set(f[4], tonumber(f[7] or '0'))
queue_known(queue_base(f[4]), f[8]) -- live again
if available <= now then
  wake(f[6])
end
return answer('applied', now, job)
