-- queue_stats: the live jobs (ready, leased) of every known queue, counted by state, with
-- the oldest due ready job (queue_stats.sql), from the queue's candidate sets and its leases
-- set ({P}:q:<queue>:leased, see leases_key): a candidate set holds the queue's ready jobs
-- scored by available_at and its leased ones by lease end, so per queue
--   leased    = leases scored after now          expired = leases scored at or before now
--   ready     = candidates due - expired leases still in a set (scored above -inf)
--   scheduled = candidates not due - leased
-- O(log n) per priority level, plus for oldest_ready_at the expired leases ahead of the
-- oldest ready job (skipped one by one; none once a claim took them over). A known queue
-- without live jobs is left out of {P}:queues (submit and requeue enter it again).
-- KEYS: clock, the known queues (hash)
-- ARGV: now override
-- Reply: one JSON string: [now, [queue, ready, scheduled, leased, expired, oldest or null],
-- ...], in no particular order.
local now = store_now(KEYS[1], ARGV[1], false)
local now_s, after_s = fmt(now), '(' .. fmt(now)
local known = redis.call('HGETALL', KEYS[2])
local reply = { now_s }
for i = 1, #known, 2 do
  local base, name = known[i], known[i + 1]
  local leases = leases_key(base)
  local leased = redis.call('ZCOUNT', leases, after_s, '+inf')
  local expired = redis.call('ZCOUNT', leases, '-inf', now_s)
  local expired_in_sets = redis.call('ZCOUNT', leases, '(-inf', now_s)
  local sets = queue_sets(base)
  local due, later = 0, 0
  for n = 1, #sets, 2 do
    due = due + redis.call('ZCOUNT', sets[n], '-inf', now_s)
    later = later + redis.call('ZCOUNT', sets[n], after_s, '+inf')
  end
  local ready, scheduled = due - expired_in_sets, later - leased
  if ready + scheduled + leased + expired == 0 then
    redis.call('HDEL', KEYS[2], base)
  else
    local oldest, oldest_s = nil, cjson.null
    if ready > 0 then
      for n = 1, #sets, 2 do
        -- The first due member of the set that is not an expired lease.
        local found = redis.call('ZRANGEBYSCORE', sets[n], '-inf', now_s, 'WITHSCORES', 'LIMIT',
          0, expired_in_sets + 1)
        for m = 1, #found, 2 do
          if expired_in_sets == 0 or not redis.call('ZSCORE', leases, found[m]) then
            local score = tonumber(found[m + 1])
            if oldest == nil or score < oldest then
              oldest, oldest_s = score, found[m + 1]
            end
            break
          end
        end
      end
    end
    reply[#reply + 1] = { name, ready, scheduled, leased, expired, oldest_s }
  end
end
return cjson.encode(reply)
