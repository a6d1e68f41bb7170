-- submit: insert the job if its id is new (submit.sql); an existing job is left unchanged.
-- KEYS: job, candidates, queue listing, all jobs listing, seq, clock, wake, and with a
--       unique key its pointer ({P}:u:<key>)
-- ARGV: now override, job id, queue, member suffix, payload, has payload, delay, max
--       attempts, priority, timeout ('' for none), headers (JSON text, '' for none), and
--       with a unique key: the key, its window ('' for none)
-- KEYS[2] is the queue's own candidate set; a job of another priority than 0 goes to the
-- set of its priority (priority_set), entered in the queue's list of priorities.
local job = KEYS[1]
local delay = delay_arg('delay', ARGV[7])
number_arg('max_attempts', ARGV[8], 1, MAX_ATTEMPTS)
local priority = priority_arg(ARGV[9])
local timeout = timeout_arg(ARGV[10])
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
local candidates = priority_set(KEYS[2], priority)
local member = string.format('%016x', seq) .. ARGV[4]
local available = now + delay
local now_s, available_s = fmt(now), fmt(available)
redis.call('HSET', job, 'id', ARGV[2], 'q', ARGV[3], 's', 'ready', 'g', '0', 'av', available_s,
  'a', '0', 'm', ARGV[8], 'c', now_s, 'u', now_s, 'z', candidates, 'k', member, 'w', KEYS[7],
  'pr', string.format('%d', priority))
if ARGV[6] == '1' then
  redis.call('HSET', job, 'p', ARGV[5])
end
if timeout then
  redis.call('HSET', job, 'to', fmt(timeout))
end
if ARGV[11] ~= '' then
  redis.call('HSET', job, 'hd', ARGV[11])
end
if ukey then
  unique_take(job, ukey, ARGV[12], ARGV[13])
end
redis.call('ZADD', candidates, available_s, member)
register_set(candidates, priority)
queue_known(KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], seq, member)
redis.call('ZADD', KEYS[4], seq, member)
if available <= now then
  wake(KEYS[7])
end
return answer('applied', now, job)
