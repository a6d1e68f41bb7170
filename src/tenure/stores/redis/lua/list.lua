-- list: jobs in submission order from one listing set, optionally of one state. Examines at
-- most `budget` jobs per call so the server is never blocked for long; the reply's cursor
-- (the last submission number examined) continues the walk, false when it is finished.
-- KEYS: clock, listing set (all jobs, or one queue's)
-- ARGV: now override, state or '', cursor or '', limit, budget, job key prefix
-- Reply: { now, cursor, row, row, ... }
local now = store_now(KEYS[1], ARGV[1], false)
local state, limit, budget, job_prefix = ARGV[2], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local low = '-inf'
if ARGV[3] ~= '' then
  low = '(' .. ARGV[3]
end
local found = redis.call('ZRANGEBYSCORE', KEYS[2], low, '+inf', 'WITHSCORES', 'LIMIT', 0, budget)
local reply = { fmt(now), false }
for i = 1, #found, 2 do
  local job = job_prefix .. string.sub(found[i], 17)
  if state == '' or redis.call('HGET', job, 's') == state then
    reply[#reply + 1] = row(job)
    if #reply - 2 >= limit then
      reply[2] = found[i + 1]
      return reply
    end
  end
end
if #found == 2 * budget then
  reply[2] = found[#found]
end
return reply
