-- find_leases: the running leases of an owner on jobs of some queues whose secret hash is
-- one of those given: what a claim whose reply was lost took (only that claim knows those
-- hashes), in claim order (highest priority, then oldest). Changes nothing. A lease taken by that claim ends by now + ttl
-- (it was granted at or before now), so only that part of each candidate set is read.
-- KEYS: clock, then the candidate set of each queue
-- ARGV: now override, owner, ttl, job key prefix, then the secret hashes
-- Reply: one JSON string (see json_row): [now, item, ...], ["applied", <row>] per lease.
local now = store_now(KEYS[1], ARGV[1], false)
local owner, ttl, job_prefix = ARGV[2], ttl_arg(ARGV[3]), ARGV[4]
local wanted = {}
for i = 5, #ARGV do
  wanted[ARGV[i]] = true
end
local found = {}
local sets = {}
for k = 2, #KEYS do
  local own = queue_sets(KEYS[k]) -- every priority's set of the queue
  for n = 1, #own, 2 do
    sets[#sets + 1] = { own[n], own[n + 1] }
  end
end
for _, level in ipairs(sets) do
  local set, priority = level[1], level[2]
  local members = redis.call('ZRANGEBYSCORE', set, '(' .. fmt(now), fmt(now + ttl),
    'WITHSCORES')
  for i = 1, #members, 2 do
    local job = job_prefix .. string.sub(members[i], 17)
    local f = redis.call('HMGET', job, 's', 'o', 'h', 'lu')
    if f[1] == 'leased' and f[2] == owner and f[3] and wanted[f[3]] and f[4]
      and tonumber(f[4]) > now then
      found[#found + 1] = { tonumber(members[i + 1]),
        tonumber(string.sub(members[i], 1, 16), 16), job, priority }
    end
  end
end
table.sort(found, function(a, b)
  -- claim order: the highest priority, then the oldest
  if a[4] ~= b[4] then
    return a[4] > b[4]
  end
  return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end)
local reply = { fmt(now) }
for _, item in ipairs(found) do
  local answer = json_row(item[3])
  table.insert(answer, 1, 'applied')
  reply[#reply + 1] = answer
end
return cjson.encode(reply)
