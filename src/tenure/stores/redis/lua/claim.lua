-- claim: take one job by id when it is free or its lease expired by store time (claim.sql);
-- an expired lease on the last allowed attempt buries the job instead (bury.sql).
-- A limited queue's job is taken only while the queue has room (queue_room), a rate-limited
-- queue's only while its bucket holds a whole token, which the lease spends, as claim_next
-- does.
-- KEYS: job, clock, the queue limits (hash), the queue rates (hash)
-- ARGV: now override, owner, ttl, secret hash
local job = KEYS[1]
local ttl = ttl_arg(ARGV[3])
local now = store_now(KEYS[2], ARGV[1], true)
if redis.call('EXISTS', job) == 0 then
  return { 'missing', fmt(now) }
end
local f = redis.call('HMGET', job, 's', 'g', 'av', 'a', 'm', 'z', 'k')
local base = f[6] and queue_base(f[6])
local b = base and bucket(KEYS[4], base, now)
if claimable(f, now) and (queue_room(KEYS[3], base, now) or 1) > 0
  and (not b or bucket_room(b) > 0) then
  local taken = take(job, f, f[7], f[6], ARGV[2], ttl, ARGV[4], now)
  if b then
    spend_token(KEYS[4], base, b)
  end
  return answer('applied', now, job, taken)
end
if f[1] == 'leased' and tonumber(f[3]) <= now and tonumber(f[4]) >= tonumber(f[5]) then
  bury(job, f[7], f[6], now)
  return answer('buried', now, job)
end
return answer('missed', now, job)
