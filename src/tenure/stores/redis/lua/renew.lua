-- renew: extend the current lease to now + ttl by store time (renew.sql; see renew_job).
-- KEYS: job, clock
-- ARGV: now override, owner, generation, secret hash, ttl
local job = KEYS[1]
local ttl = ttl_arg(ARGV[5])
local now = store_now(KEYS[2], ARGV[1], true)
local status = renew_job(job, ARGV[2], ARGV[3], ARGV[4], ttl, now)
if status == 'missing' then
  return { 'missing', fmt(now) }
end
return answer(status, now, job)
