-- wait_job: the job as it is; while it is unfinished (ready or leased), the caller is
-- registered as its waiter until `ttl` seconds from now, so that the write that finishes
-- it pushes onto its `ended` list (ended() in _lib.lua), on which the caller then blocks.
-- A finished job passes the wake-up on to the next waiter, if any.
-- KEYS: job, clock, waiting marker, ended list
-- ARGV: now override, ttl (whole seconds)
local job = KEYS[1]
local now = store_now(KEYS[2], ARGV[1], false)
local state = redis.call('HGET', job, 's')
if not state then
  return { 'missing', fmt(now) }
end
if state == 'ready' or state == 'leased' then
  local ttl = tonumber(ARGV[2])
  if redis.call('TTL', KEYS[3]) < ttl then
    redis.call('SET', KEYS[3], '1', 'EX', ttl)
  end
else
  ended(job)
end
return answer('applied', now, job)
