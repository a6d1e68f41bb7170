-- submit: insert the job if its id is new (submit.sql); an existing job is left unchanged.
-- KEYS: job, candidates, queue listing, all jobs listing, seq, clock, wake, and with a
--       unique key its pointer ({P}:u:<key>)
-- ARGV: now override, job id, queue, member suffix, payload, has payload, delay, max
--       attempts, and with a unique key: the key, its window ('' for none)
local job = KEYS[1]
local delay = delay_arg('delay', ARGV[7])
number_arg('max_attempts', ARGV[8], 1, MAX_ATTEMPTS)
local now = store_now(KEYS[6], ARGV[1], true)
if redis.call('EXISTS', job) == 1 then
  return answer('missed', now, job)
end
local ukey = KEYS[8]
if ukey then
  local holder = unique_holder(ukey, now)
  if holder then
    return answer('missed', now, holder)
  end
end
local seq = redis.call('INCR', KEYS[5])
local member = string.format('%016x', seq) .. ARGV[4]
local available = now + delay
local now_s, available_s = fmt(now), fmt(available)
redis.call('HSET', job, 'id', ARGV[2], 'q', ARGV[3], 's', 'ready', 'g', '0', 'av', available_s,
  'a', '0', 'm', ARGV[8], 'c', now_s, 'u', now_s, 'z', KEYS[2], 'k', member, 'w', KEYS[7])
if ARGV[6] == '1' then
  redis.call('HSET', job, 'p', ARGV[5])
end
if ukey then
  unique_take(job, ukey, ARGV[9], ARGV[10])
end
redis.call('ZADD', KEYS[2], available_s, member)
redis.call('ZADD', KEYS[3], seq, member)
redis.call('ZADD', KEYS[4], seq, member)
if available <= now then
  wake(KEYS[7])
end
return answer('applied', now, job)
