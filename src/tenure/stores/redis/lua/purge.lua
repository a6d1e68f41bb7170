-- purge: one bounded step of a purge (purge.sql). Walks the listing of every job in
-- submission order from the cursor, examining at most `budget` jobs, and deletes those in
-- the states given last changed at now - older_than or before (remove_job), at most `limit`.
-- KEYS: clock, all jobs listing, floor
-- ARGV: now override, cursor or '', limit, budget, job key prefix, older than, then states
-- Reply: { deleted, cursor }: cursor is the submission number to go on after, false at the end.
local older_than = number_arg('older_than', ARGV[6], 0, 1e10)  -- before the first write
local now = store_now(KEYS[1], ARGV[1], true)
local limit, budget, job_prefix = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local cutoff = now - older_than
local low = '-inf'
if ARGV[2] ~= '' then
  low = '(' .. ARGV[2]
end
local found = redis.call('ZRANGEBYSCORE', KEYS[2], low, '+inf', 'WITHSCORES', 'LIMIT', 0, budget)
local deleted = 0
for i = 1, #found, 2 do
  local job = job_prefix .. string.sub(found[i], 17)
  local f = redis.call('HMGET', job, 's', 'u')
  if f[1] and takes(f[1], 7) and tonumber(f[2]) <= cutoff then
    remove_job(job, KEYS[2], KEYS[3])
    deleted = deleted + 1
    if deleted >= limit then
      return { deleted, found[i + 1] }
    end
  end
end
if #found == 2 * budget then
  return { deleted, found[#found] }
end
return { deleted, false }
