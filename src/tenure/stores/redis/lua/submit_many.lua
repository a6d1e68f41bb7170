-- submit_many: submit each job as submit.lua does, all in this one run at one store time:
-- a new id is inserted, an existing job left unchanged and reported.
-- KEYS: clock, seq, all jobs listing, then for each queue of the batch: its candidates,
--       listing and wake keys
-- ARGV: now override, job key prefix, the queues' names as a JSON array (in the order of
--       their keys), then the batch as three JSON arrays (one string each rather than
--       several arguments per job, and only what differs from job to job sent per job):
--   4: the shared spec, what most jobs have in common: [false, queue number (1: the first
--      queue), delay, max attempts, priority, timeout or null, null, null, null, headers
--      JSON text or null];
--   5: each job's id and payload (JSON text or null), flat: [id, payload, id, payload...];
--   6: the jobs that have a spec of their own (another value than the shared spec's, a
--      unique key, or an id whose encoded form is not the id itself), flat and in
--      increasing job number (1-based): [n, spec, n, spec...], a spec [encoded id (its key
--      and member suffix), queue number, delay, max attempts, priority, timeout or null,
--      unique key, its window, its pointer's name (the three null without a key), headers
--      JSON text or null].
-- Delay, max attempts, priority, timeout and window are decimal strings; a job of another
-- priority than 0 goes to its priority's set (priority_set).
-- Reply: {now, statuses} or {now, statuses, details}: statuses has one letter per job, in
-- order: 'a' (applied: the new row is what the job's arguments and `now` make it, which the
-- client builds itself rather than reading it back), 's' (its unique key was taken by an
-- earlier job of this batch: that job's row, missed) or 'm' (missed: the row as it is);
-- details, when any job is not new, is one JSON string (see json_row) holding one item per
-- such job, in order: the number (1-based) of the job that took the key ('s'), the row
-- ('m').
local queues, shared = cjson.decode(ARGV[3]), cjson.decode(ARGV[4])
local flat, others = cjson.decode(ARGV[5]), cjson.decode(ARGV[6])
local size = #flat / 2
local specs = {}
for i = 1, #others, 2 do
  specs[others[i]] = others[i + 1]
end
-- Every argument is checked before the first write (a refused call writes nothing): the
-- shared spec once, each job's own spec once.
local function check(spec)
  delay_arg('delay', spec[3])
  number_arg('max_attempts', spec[4], 1, MAX_ATTEMPTS)
  priority_arg(spec[5])
  timeout_arg(spec[6])
end
check(shared)
for i = 2, #others, 2 do
  check(others[i])
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
for n = 1, size do
  local spec = specs[n]
  job_keys[n] = job_prefix .. (spec and spec[1] or flat[2 * n - 1])
end
local any_exist = redis.call('EXISTS', unpack(job_keys)) > 0
for n = 1, size do
  if not any_exist or redis.call('EXISTS', job_keys[n]) == 0 then
    local spec = specs[n]
    local ukey = spec and spec[9]
    if not ukey or ukey == cjson.null then
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
local statuses, details = {}, {}
local woken = {}
-- What a job's queue, priority and delay make (its candidates set and its additions, its
-- queue's listing additions and wake key, the priority text, the available time) is made
-- once for a run of jobs that share them (the usual batch: all of them).
local last_q, last_priority, last_delay
local models, can_copy = {}, true
local candidates, wake_key, priority, priority_s, available, available_s, to_candidates, to_listing
for n = 1, size do
  local job = job_keys[n]
  if new[n] then
    local spec = specs[n] or shared
    local id = flat[2 * n - 1]
    local q = 4 + 3 * (spec[2] - 1)
    if q ~= last_q or spec[5] ~= last_priority then
      last_q, last_priority = q, spec[5]
      priority = tonumber(spec[5])
      candidates, wake_key = priority_set(KEYS[q], priority), KEYS[q + 2]
      priority_s = string.format('%d', priority)
      if priority ~= 0 then
        register_set(candidates, priority)
      end
      to_candidates, to_listing = pairs_of(candidates), pairs_of(KEYS[q + 1])
    end
    if spec[3] ~= last_delay then
      last_delay = spec[3]
      available = now + tonumber(spec[3])
      available_s = fmt(available)
    end
    seq = seq + 1
    local member = string.format('%016x%s', seq, spec[1] or id)
    local payload = flat[2 * n]
    local has_payload = payload ~= cjson.null
    -- A job of the shared spec is a copy of the first such job written in full (one with a
    -- payload, one without: models), its own three fields then set: COPY duplicates the
    -- hash's listpack whole, where an HSET of its 13 to 16 fields looks each one up among
    -- those before it and grows the listpack once per field (40 % of the server's
    -- instructions per batch job, under callgrind; with the copy the job costs a third
    -- less, docs/benchmarks.md). The copy holds the same fields and values as the full
    -- write would, in the same order (tests/redis/test_submit_many_copy.py). COPY came with
    -- Redis 6.2: an older server refuses it (pcall: an error reply, not a raised error),
    -- and the batch goes on with full writes.
    local model = can_copy and not specs[n] and models[has_payload]
    local copied = false
    if model then
      local done = redis.pcall('COPY', model, job)
      if done == 1 then
        copied = true
      elseif type(done) == 'table' then
        can_copy = false
      end
    end
    if copied then
      if has_payload then
        redis.call('HSET', job, 'id', id, 'k', member, 'p', payload)
      else
        redis.call('HSET', job, 'id', id, 'k', member)
      end
    else
      if has_payload then
        redis.call('HSET', job, 'id', id, 'q', queues[spec[2]], 's', 'ready', 'g', '0',
          'av', available_s, 'a', '0', 'm', spec[4], 'c', now_s, 'u', now_s, 'z', candidates,
          'k', member, 'w', wake_key, 'p', payload)
      else
        redis.call('HSET', job, 'id', id, 'q', queues[spec[2]], 's', 'ready', 'g', '0',
          'av', available_s, 'a', '0', 'm', spec[4], 'c', now_s, 'u', now_s, 'z', candidates,
          'k', member, 'w', wake_key)
      end
      -- No 'pr' at priority 0: every reader takes an absent one as 0 (as for a job written
      -- before priorities), and a field fewer is a smaller HSET for the usual job.
      if priority ~= 0 then
        redis.call('HSET', job, 'pr', priority_s)
      end
      if spec[6] ~= cjson.null then
        redis.call('HSET', job, 'to', fmt(tonumber(spec[6])))
      end
      if spec[10] ~= cjson.null then
        redis.call('HSET', job, 'hd', spec[10])
      end
      if spec[9] and spec[9] ~= cjson.null then
        unique_take(job, spec[9], spec[7], spec[8] ~= cjson.null and spec[8] or nil)
      elseif not specs[n] and not models[has_payload] then
        -- Only a compact model (a listpack: small values, as the usual job's): a copy of one
        -- holding a large payload would stay a hash table whatever its own payload, where
        -- its full write would have made a listpack.
        -- pcall: past the first write, a command the server refused (an ACL, say) must not
        -- end the run half done; without an answer there is no model.
        local encoding = redis.pcall('OBJECT', 'ENCODING', job)
        if encoding == 'listpack' or encoding == 'ziplist' then
          models[has_payload] = job
        end
      end
    end
    to_candidates[#to_candidates + 1] = available_s
    to_candidates[#to_candidates + 1] = member
    local seq_s = string.format('%d', seq) -- one text for both sets, not a conversion each
    to_listing[#to_listing + 1] = seq_s
    to_listing[#to_listing + 1] = member
    all_jobs[#all_jobs + 1] = seq_s
    all_jobs[#all_jobs + 1] = member
    if available <= now then
      woken[wake_key] = true
    end
    statuses[n] = 'a'
  elseif same[n] then
    statuses[n] = 's'
    details[#details + 1] = same[n]
  else
    statuses[n] = 'm'
    details[#details + 1] = json_row(holders[n] or job)
  end
end
-- One ZADD per set. A new set, or a listpack (fewer than 128 members, Redis's default
-- zset-max-listpack-entries, in a set no claim has written: see _lib.lua's as_skiplist),
-- finds each new member's place by reading from its first entry on: members in increasing
-- order (as gathered) would each be read past all the others, so they go in reversed, each
-- found at the first entry. A skiplist, for which the reversal costs more than it saves
-- (server instructions under callgrind, docs/benchmarks.md), takes them as gathered.
for set, pairs_ in pairs(adds) do
  local size_ = #pairs_
  if size_ > 0 then
    local encoding = redis.pcall('OBJECT', 'ENCODING', set) -- pcall: as OBJECT above
    if not encoding or encoding == 'listpack' or encoding == 'ziplist' then
      local reversed = {}
      for i = 1, size_, 2 do
        reversed[size_ - i] = pairs_[i]
        reversed[size_ - i + 1] = pairs_[i + 1]
      end
      pairs_ = reversed
    end
    redis.call('ZADD', set, unpack(pairs_))
  end
end
for q = 1, #queues do
  queue_known(KEYS[1 + 3 * q], queues[q]) -- the known queues (issue #20)
end
for wake_key in pairs(woken) do
  wake(wake_key) -- one wake-up per queue and batch
end
if #details == 0 then
  return { now_s, table.concat(statuses) }
end
return { now_s, table.concat(statuses), cjson.encode(details) }
