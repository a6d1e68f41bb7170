-- claim_next: for each secret hash, claim the oldest claimable job of the queues: lowest
-- (available_at, submission order) across the queues' candidate sets (pick.sql). Expired
-- leases on their last attempt met on the way are buried (bury.sql) and the pick goes on.
-- KEYS: clock, then the candidate set of each queue
-- ARGV: now override, owner, ttl, job key prefix, then one secret hash per lease wanted
-- Reply: one JSON string (see json_row): [now, row, row, ...], one row per lease granted.
local now = store_now(KEYS[1], ARGV[1], true)
local now_s = fmt(now)
local owner, ttl, job_prefix = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local claimed = { now_s }

local function oldest()
  local best_set, best_member, best_score, best_seq
  for i = 2, #KEYS do
    local found = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', now_s, 'WITHSCORES', 'LIMIT', 0, 1)
    if found[1] then
      local score = tonumber(found[2])
      local seq = tonumber(string.sub(found[1], 1, 16), 16)
      if best_score == nil or score < best_score or (score == best_score and seq < best_seq) then
        best_set, best_member, best_score, best_seq = KEYS[i], found[1], score, seq
      end
    end
  end
  return best_set, best_member
end

for i = 5, #ARGV do
  while true do
    local candidates, member = oldest()
    if candidates == nil then
      return cjson.encode(claimed)
    end
    local job = job_prefix .. string.sub(member, 17)
    local f = redis.call('HMGET', job, 's', 'g', 'av', 'a', 'm')
    if not f[1] or not below_max(f[2]) then
      -- Never claimable again (pick.sql leaves out exhausted generations).
      redis.call('ZREM', candidates, member)
    elseif f[1] == 'leased' and tonumber(f[4]) >= tonumber(f[5]) then
      bury(job, member, candidates, now)
    else
      if claimable(f, now) then
        take(job, member, candidates, owner, ttl, ARGV[i], now)
        claimed[#claimed + 1] = json_row(job)
      end
      break
    end
  end
end
return cjson.encode(claimed)
