-- complete: the job is done (complete.sql, in complete_job).
-- KEYS: job, clock
-- ARGV: now override, owner, generation, secret hash, receipt, result, has result
local job = KEYS[1]
local now = store_now(KEYS[2], ARGV[1], true)
local status = complete_job(job, ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], now)
if status == 'missing' then
  return { 'missing', fmt(now) }
end
return answer(status, now, job)
