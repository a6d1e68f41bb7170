-- index_leases: one bounded step of building the layout-3 bookkeeping (issue #20) for a
-- store written by an older tenure: walks the listing of every job in submission order
-- from the cursor, at most `budget` jobs, entering each live job's queue in the known
-- queues and each leased job in its queue's leases set (scored by its lease end, or -inf
-- when no candidate set holds it: see leases_key), and taking any other job out of it. Each
-- step is exact for the jobs it reads; the scripts of this layout keep them so afterwards.
-- KEYS: clock, all jobs listing
-- ARGV: now override, cursor or '', budget, job key prefix
-- Reply: the submission number to go on after, false at the end.
store_now(KEYS[1], ARGV[1], false) -- refuses a store that lost its data
local budget, job_prefix = tonumber(ARGV[3]), ARGV[4]
local low = '-inf'
if ARGV[2] ~= '' then
  low = '(' .. ARGV[2]
end
local found = redis.call('ZRANGEBYSCORE', KEYS[2], low, '+inf', 'WITHSCORES', 'LIMIT', 0, budget)
for i = 1, #found, 2 do
  local job = job_prefix .. string.sub(found[i], 17)
  local f = redis.call('HMGET', job, 's', 'z', 'k', 'lu', 'q')
  if f[1] == 'ready' or f[1] == 'leased' then
    queue_known(queue_base(f[2]), f[5])
  end
  if f[1] == 'leased' then
    local score = '-inf'
    if f[4] and redis.call('ZSCORE', f[2], f[3]) then
      score = f[4]
    end
    lease_mark(f[2], f[3], score)
  elseif f[1] then
    lease_clear(f[2], f[3])
  end
end
if #found == 2 * budget then
  return found[#found]
end
return false
