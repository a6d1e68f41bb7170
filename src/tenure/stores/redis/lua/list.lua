-- list: one page of jobs in submission order from one listing set (all jobs, or one
-- queue's), optionally of one state and owner, created at or before now - older_than.
-- Examines at most `budget` jobs per call so the server is never blocked for long; the
-- reply's cursor (the submission number last examined) continues the walk, false once
-- the set is exhausted. Never scans the keyspace: the listing sets are the index.
-- KEYS: clock, listing set
-- ARGV: now override, state or '', cursor or '', limit, budget, job key prefix, owner or '',
--       older_than or ''
-- Reply: { now, cursor, seq, row, seq, row, ... }
local now = store_now(KEYS[1], ARGV[1], false)
local state, limit, budget, job_prefix = ARGV[2], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local owner = ARGV[7]
local created_before = nil
if ARGV[8] ~= '' then
  created_before = now - tonumber(ARGV[8])
end
local low = '-inf'
if ARGV[3] ~= '' then
  low = '(' .. ARGV[3]
end
local found = redis.call('ZRANGEBYSCORE', KEYS[2], low, '+inf', 'WITHSCORES', 'LIMIT', 0, budget)
local reply = { fmt(now), false }
local rows = 0
for i = 1, #found, 2 do
  local job = job_prefix .. string.sub(found[i], 17)
  local f = redis.call('HMGET', job, 's', 'o', 'c')
  if f[1] and (state == '' or f[1] == state) and (owner == '' or f[2] == owner)
    and (created_before == nil or tonumber(f[3]) <= created_before) then
    reply[#reply + 1] = found[i + 1]
    reply[#reply + 1] = row(job)
    rows = rows + 1
    if rows >= limit then
      reply[2] = found[i + 1]
      return reply
    end
  end
end
if #found == 2 * budget then
  reply[2] = found[#found]
end
return reply
