-- submit_many: submit each job as submit.lua does, all in this one run at one store time:
-- a new id is inserted, an existing job left unchanged and reported.
-- KEYS: clock, seq, all jobs listing, then for each queue of the batch: its candidates,
--       listing and wake keys
-- ARGV: now override, job key prefix, the queues' names as a JSON array (in the order of
--       their keys), the batch as one JSON array (one string to send rather than seven
--       per job), each job [id, encoded id (its key and member suffix), queue number
--       (1: the first queue), payload JSON text or null, delay, max attempts, priority,
--       timeout or null, unique key, its window, its pointer's name (the three null
--       without a key), headers JSON text or null] (delay, max attempts, priority, timeout
--       and window as decimal strings); a job of another priority than 0 goes to its
--       priority's set (priority_set)
-- Reply: one JSON string (see json_row): [now, item, ...], one item per job, in order:
-- ["applied", <row>] or ["missed", <row as it is>].
local queues, batch = cjson.decode(ARGV[3]), cjson.decode(ARGV[4])
-- Every argument is checked before the first write (a refused call writes nothing).
for _, j in ipairs(batch) do
  delay_arg('delay', j[5])
  number_arg('max_attempts', j[6], 1, MAX_ATTEMPTS)
  priority_arg(j[7])
  timeout_arg(j[8])
end
local now = store_now(KEYS[1], ARGV[1], true)
local now_s = fmt(now)
local job_prefix = ARGV[2]
-- Which jobs are new, then one INCRBY for their submission numbers (in input order).
-- A job with a unique key is new only if the key is free (issue #18): held by a job of the
-- store (holders), or taken by an earlier job of this batch (same), it is answered with that
-- job instead.
local new, holders, same, taken = {}, {}, {}, {}
local count = 0
for n, j in ipairs(batch) do
  if redis.call('EXISTS', job_prefix .. j[2]) == 0 then
    local ukey = j[11]
    if ukey == cjson.null then
      new[n] = true
    elseif taken[ukey] then
      same[n] = taken[ukey]
    else
      holders[n] = unique_holder(ukey, now)
      if not holders[n] then
        taken[ukey] = n
        new[n] = true
      end
    end
    if new[n] then
      count = count + 1
    end
  end
end
local seq = 0
if count > 0 then
  seq = redis.call('INCRBY', KEYS[2], count) - count
end
-- The sets' additions, one ZADD per set: score, member, score, member...
local adds = { [KEYS[3]] = {} }
local reply = { now_s }
local woken = {}
for n, j in ipairs(batch) do
  local job = job_prefix .. j[2]
  if new[n] then
    local q = 4 + 3 * (j[3] - 1)
    local priority = tonumber(j[7])
    local candidates, listing, wake_key = priority_set(KEYS[q], priority), KEYS[q + 1], KEYS[q + 2]
    local priority_s, timeout_s = string.format('%d', priority), cjson.null
    if j[8] ~= cjson.null then
      timeout_s = fmt(tonumber(j[8]))
    end
    seq = seq + 1
    local member = string.format('%016x', seq) .. j[2]
    local available = now + tonumber(j[5])
    local available_s = fmt(available)
    local payload = j[4]
    if payload == cjson.null then
      redis.call('HSET', job, 'id', j[1], 'q', queues[j[3]], 's', 'ready', 'g', '0',
        'av', available_s, 'a', '0', 'm', j[6], 'c', now_s, 'u', now_s, 'z', candidates,
        'k', member, 'w', wake_key, 'pr', priority_s)
    else
      redis.call('HSET', job, 'id', j[1], 'q', queues[j[3]], 's', 'ready', 'g', '0',
        'av', available_s, 'a', '0', 'm', j[6], 'c', now_s, 'u', now_s, 'z', candidates,
        'k', member, 'w', wake_key, 'p', payload, 'pr', priority_s)
    end
    if timeout_s ~= cjson.null then
      redis.call('HSET', job, 'to', timeout_s)
    end
    if j[12] ~= cjson.null then
      redis.call('HSET', job, 'hd', j[12])
    end
    register_set(candidates, priority)
    if j[11] ~= cjson.null then
      unique_take(job, j[11], j[9], j[10] ~= cjson.null and j[10] or nil)
    end
    for _, added in ipairs({ { candidates, available_s }, { listing, seq }, { KEYS[3], seq } }) do
      local set = adds[added[1]]
      if not set then
        set = {}
        adds[added[1]] = set
      end
      set[#set + 1] = added[2]
      set[#set + 1] = member
    end
    if available <= now then
      woken[wake_key] = true
    end
    -- The new row as json_row would read it back (COLUMNS order), without reading it.
    reply[#reply + 1] = { 'applied', j[1], queues[j[3]], 'ready', cjson.null, '0', cjson.null,
      cjson.null, available_s, '0', j[6], payload, cjson.null, cjson.null, now_s, now_s,
      priority_s, timeout_s, j[9], j[12] }
  elseif same[n] then
    local item = { unpack(reply[same[n] + 1]) }
    item[1] = 'missed'
    reply[#reply + 1] = item
  elseif holders[n] then
    local item = json_row(holders[n])
    table.insert(item, 1, 'missed')
    reply[#reply + 1] = item
  else
    local item = json_row(job)
    table.insert(item, 1, 'missed')
    reply[#reply + 1] = item
  end
end
for set, pairs_ in pairs(adds) do
  if #pairs_ > 0 then
    redis.call('ZADD', set, unpack(pairs_))
  end
end
for q = 1, #queues do
  queue_known(KEYS[1 + 3 * q], queues[q]) -- the known queues (issue #20)
end
for wake_key in pairs(woken) do
  wake(wake_key) -- one wake-up per queue and batch
end
return cjson.encode(reply)
