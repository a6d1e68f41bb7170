-- delete: a job in the states taken (done, dead, cancelled) is deleted (delete.sql), and
-- the store's generation floor raised to its generation: a claim of a job submitted again
-- under its id takes a generation above it.
-- KEYS: job, clock, all jobs listing, floor
-- ARGV: now override, then the states taken
local job = KEYS[1]
local now = store_now(KEYS[2], ARGV[1], true)
if redis.call('EXISTS', job) == 0 then
  return { 'missing', fmt(now) }
end
if not takes(redis.call('HGET', job, 's'), 2) then
  return answer('missed', now, job)
end
local reply = answer('applied', now, job)
remove_job(job, KEYS[3], KEYS[4])
return reply
