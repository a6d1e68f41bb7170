-- get: one job as it is now, with the store time it was read at.
-- KEYS: job, clock
-- ARGV: now override
local job = KEYS[1]
local now = store_now(KEYS[2], ARGV[1], false)
if redis.call('EXISTS', job) == 0 then
  return { 'missing', fmt(now) }
end
return answer('applied', now, job)
