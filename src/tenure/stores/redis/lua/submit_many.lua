-- submit_many: submit each job as submit.lua does, all in this one run at one store time:
-- a new id is inserted, an existing job left unchanged and reported.
-- KEYS: clock, seq, all jobs listing, then for each job: job, candidates, queue listing, wake
-- ARGV: now override, then for each job: job id, queue, member suffix, payload, has
--       payload, delay, max attempts
-- Reply: one JSON string (see json_row): [now, item, ...], one item per job, in order:
-- ["applied", <row>] or ["missed", <row as it is>].
local PER_KEYS, PER_ARGS = 4, 7
local count = (#KEYS - 3) / PER_KEYS
-- Every argument is checked before the first write (a refused call writes nothing).
for n = 0, count - 1 do
  local a = 2 + PER_ARGS * n
  delay_arg('delay', ARGV[a + 5])
  number_arg('max_attempts', ARGV[a + 6], 1, MAX_ATTEMPTS)
end
local now = store_now(KEYS[1], ARGV[1], true)
local now_s = fmt(now)
local reply = { now_s }
local woken = {}
for n = 0, count - 1 do
  local k, a = 4 + PER_KEYS * n, 2 + PER_ARGS * n
  local job = KEYS[k]
  local status = 'missed'
  if redis.call('EXISTS', job) == 0 then
    status = 'applied'
    local seq = redis.call('INCR', KEYS[2])
    local member = string.format('%016x', seq) .. ARGV[a + 2]
    local available = now + tonumber(ARGV[a + 5])
    local available_s = fmt(available)
    redis.call('HSET', job, 'id', ARGV[a], 'q', ARGV[a + 1], 's', 'ready', 'g', '0',
      'av', available_s, 'a', '0', 'm', ARGV[a + 6], 'c', now_s, 'u', now_s,
      'z', KEYS[k + 1], 'k', member, 'w', KEYS[k + 3])
    if ARGV[a + 4] == '1' then
      redis.call('HSET', job, 'p', ARGV[a + 3])
    end
    redis.call('ZADD', KEYS[k + 1], available_s, member)
    redis.call('ZADD', KEYS[k + 2], seq, member)
    redis.call('ZADD', KEYS[3], seq, member)
    if available <= now and not woken[KEYS[k + 3]] then
      woken[KEYS[k + 3]] = true -- one wake-up per queue and batch
      wake(KEYS[k + 3])
    end
  end
  local item = json_row(job)
  table.insert(item, 1, status)
  reply[#reply + 1] = item
end
return cjson.encode(reply)
