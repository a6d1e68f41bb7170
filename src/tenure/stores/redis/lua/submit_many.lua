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
-- "applied" (the new row is what the job's arguments and `now` make it, which the client
-- builds itself rather than reading it back), ["same", n] (its unique key was taken by the
-- n-th job of this batch, 1-based: that job's row, missed) or ["missed", <row as it is>].
local queues, batch = cjson.decode(ARGV[3]), cjson.decode(ARGV[4])
-- Every argument is checked before the first write (a refused call writes nothing); a value
-- the same as the previous job's (one interned string: the usual batch) was checked with it.
local last_delay, last_attempts, last_priority, last_timeout
for _, j in ipairs(batch) do
  if j[5] ~= last_delay then
    delay_arg('delay', j[5])
    last_delay = j[5]
  end
  if j[6] ~= last_attempts then
    number_arg('max_attempts', j[6], 1, MAX_ATTEMPTS)
    last_attempts = j[6]
  end
  if j[7] ~= last_priority then
    priority_arg(j[7])
    last_priority = j[7]
  end
  if j[8] ~= last_timeout then
    timeout_arg(j[8])
    last_timeout = j[8]
  end
end
local now = store_now(KEYS[1], ARGV[1], true)
local now_s = fmt(now)
local job_prefix = ARGV[2]
-- Which jobs are new, then one INCRBY for their submission numbers (in input order).
-- A job with a unique key is new only if the key is free (issue #18): held by a job of the
-- store (holders), or taken by an earlier job of this batch (same), it is answered with that
-- job instead.
-- One EXISTS of every job's key first: none there (the usual batch of new ids) spares the
-- EXISTS of each.
local new, holders, same, taken = {}, {}, {}, {}
local count = 0
local job_keys = {}
for n, j in ipairs(batch) do
  job_keys[n] = job_prefix .. j[2]
end
local any_exist = redis.call('EXISTS', unpack(job_keys)) > 0
for n, j in ipairs(batch) do
  if not any_exist or redis.call('EXISTS', job_keys[n]) == 0 then
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
local all_jobs = adds[KEYS[3]]
local function pairs_of(set)
  local pairs_ = adds[set]
  if not pairs_ then
    pairs_ = {}
    adds[set] = pairs_
  end
  return pairs_
end
local reply = { now_s }
local woken = {}
-- What a job's queue, priority and delay make (its candidates set and its additions, its
-- queue's listing additions and wake key, the priority text, the available time) is made
-- once for a run of jobs that share them (the usual batch: all of them).
local last_q, last_priority, last_delay
local candidates, wake_key, priority, priority_s, available, available_s, to_candidates, to_listing
for n, j in ipairs(batch) do
  local job = job_keys[n]
  if new[n] then
    local q = 4 + 3 * (j[3] - 1)
    if q ~= last_q or j[7] ~= last_priority then
      last_q, last_priority = q, j[7]
      priority = tonumber(j[7])
      candidates, wake_key = priority_set(KEYS[q], priority), KEYS[q + 2]
      priority_s = string.format('%d', priority)
      if priority ~= 0 then
        register_set(candidates, priority)
      end
      to_candidates, to_listing = pairs_of(candidates), pairs_of(KEYS[q + 1])
    end
    if j[5] ~= last_delay then
      last_delay = j[5]
      available = now + tonumber(j[5])
      available_s = fmt(available)
    end
    seq = seq + 1
    local member = string.format('%016x', seq) .. j[2]
    local payload = j[4]
    if payload == cjson.null then
      redis.call('HSET', job, 'id', j[1], 'q', queues[j[3]], 's', 'ready', 'g', '0',
        'av', available_s, 'a', '0', 'm', j[6], 'c', now_s, 'u', now_s, 'z', candidates,
        'k', member, 'w', wake_key)
    else
      redis.call('HSET', job, 'id', j[1], 'q', queues[j[3]], 's', 'ready', 'g', '0',
        'av', available_s, 'a', '0', 'm', j[6], 'c', now_s, 'u', now_s, 'z', candidates,
        'k', member, 'w', wake_key, 'p', payload)
    end
    -- No 'pr' at priority 0: every reader takes an absent one as 0 (as for a job written
    -- before priorities), and a field fewer is a smaller HSET for the usual job.
    if priority ~= 0 then
      redis.call('HSET', job, 'pr', priority_s)
    end
    if j[8] ~= cjson.null then
      redis.call('HSET', job, 'to', fmt(tonumber(j[8])))
    end
    if j[12] ~= cjson.null then
      redis.call('HSET', job, 'hd', j[12])
    end
    if j[11] ~= cjson.null then
      unique_take(job, j[11], j[9], j[10] ~= cjson.null and j[10] or nil)
    end
    to_candidates[#to_candidates + 1] = available_s
    to_candidates[#to_candidates + 1] = member
    to_listing[#to_listing + 1] = seq
    to_listing[#to_listing + 1] = member
    all_jobs[#all_jobs + 1] = seq
    all_jobs[#all_jobs + 1] = member
    if available <= now then
      woken[wake_key] = true
    end
    reply[#reply + 1] = 'applied'
  elseif same[n] then
    reply[#reply + 1] = { 'same', same[n] }
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
