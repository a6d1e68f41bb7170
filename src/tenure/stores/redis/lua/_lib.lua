-- tenure: the code every script shares. The driver registers each operation as this file
-- followed by the operation's own file, so each operation is one script with one SHA.
--
-- Conventions (docs/redis.md has the key layout):
--   * Store time is seconds since the epoch as a double, read inside the script from the
--     server's TIME (or from ARGV[1] when the test hook `store_clock` is set; '' means use
--     TIME), and never earlier than the persisted floor, as in the SQLite store.
--   * Times are written with %.17g, so they read back (in Lua and in Python) as the very same
--     double; a candidate set's score is the same double as the job's `av` field.
--   * Generations are decimal strings changed only by HINCRBY and compared as strings: they
--     are never turned into Lua numbers (doubles are exact only up to 2^53).
--   * An absent hash field is NULL; replies carry false for NULL.

if redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: replicate effects, so TIME may precede writes
end

local MAX_GENERATION = '9223372036854775807' -- 2^63-1: HINCRBY's ceiling
-- pr (priority) and to (timeout) came with issue #18: a job written before has neither,
-- read as priority 0 and no timeout of its own; uk (its unique key) likewise, none; hd (its
-- headers as JSON text, issue #20) likewise, none.
local COLUMNS = { 'id', 'q', 's', 'o', 'g', 'h', 'lu', 'av', 'a', 'm', 'p', 'r', 'e', 'c', 'u',
  'pr', 'to', 'uk', 'hd' }
local WAKE_CAP = 256

-- A script formats the same few times (its store time, its leases' end) once per job:
-- string.format('%.17g') costs about a third of a microsecond, so each text is kept for the
-- rest of the run (a script's table, gone when it ends).
local formatted = {}
local function fmt(x)
  local text = formatted[x]
  if not text then
    text = string.format('%.17g', x)
    if x == x then -- NaN cannot be a table key
      formatted[x] = text
    end
  end
  return text
end

-- A script's writes are not rolled back when it fails, so every argument that can be refused
-- is checked before the first write (store_now's floor included): a refused call writes
-- nothing. The client checks the same rules first; these catch a client that did not. The
-- driver turns a BADARG error into InvalidArgument.
local function refuse(name, rule, text)
  error({ err = 'BADARG ' .. name .. ' ' .. rule .. ', got ' .. tostring(text) })
end

-- A number from `low` to `high` (NaN and infinities fail the comparisons).
local function number_arg(name, text, low, high)
  local x = tonumber(text)
  if x == nil or not (x >= low and x <= high) then
    refuse(name, 'must be a number from ' .. fmt(low) .. ' to ' .. fmt(high), text)
  end
  return x
end

-- The limits of tenure._validate (tests/redis/test_script_arguments.py checks they agree).
local MIN_TTL = 0.01
local MAX_TTL = 604800
local MAX_DELAY = 31622400
local MAX_ATTEMPTS = 1000000

local function ttl_arg(text)
  return number_arg('ttl', text, MIN_TTL, MAX_TTL)
end

local function delay_arg(name, text)
  return number_arg(name, text, 0, MAX_DELAY)
end

-- tenure._validate's priority range (a 32-bit signed integer) and job timeout rule.
local MIN_PRIORITY = -2147483648
local MAX_PRIORITY = 2147483647

local function priority_arg(text)
  local x = number_arg('priority', text, MIN_PRIORITY, MAX_PRIORITY)
  if math.floor(x) ~= x then
    refuse('priority', 'must be an integer', text)
  end
  return x
end

local function timeout_arg(text)
  if text == '' or text == nil or text == cjson.null then
    return nil
  end
  return number_arg('timeout', text, MIN_TTL, MAX_DELAY)
end

-- Priorities (issue #18). Each (queue, priority) has a candidate set of its own, so FIFO
-- within a priority stays exact (a set's score is still the job's `av`, ties by submission
-- number) and every pick stays O(log n) per priority level: priority 0 keeps the queue's
-- set {P}:q:<queue> (jobs stored before priorities need no change), priority p another one,
-- {P}:q:<queue>:p:<p> (queue names are percent-encoded, free of ':', so no queue's set can
-- be named so). {P}:q:<queue>:pri scores the sets of the queue's other priorities by
-- priority; a set that emptied (Redis deletes an empty sorted set) leaves it at the next
-- pick that meets it. A job's `z` names its own set, as before.
local function priority_set(base, priority)
  if priority == 0 then
    return base
  end
  return base .. ':p:' .. string.format('%d', priority)
end

local function queue_base(set)
  return (string.gsub(set, ':p:%-?%d+$', ''))
end

-- Enter a job's set in its queue's list of priorities (priority 0 is the queue's own set).
local function register_set(set, priority)
  if priority ~= 0 then
    redis.call('ZADD', queue_base(set) .. ':pri', priority, set)
  end
end

-- The candidate sets of the queue whose own set is `base`, highest priority first, each
-- with its priority: {set, priority, set, priority, ...}.
local function queue_sets(base)
  local registry = base .. ':pri'
  local out = {}
  local above = redis.call('ZREVRANGEBYSCORE', registry, '+inf', '(0', 'WITHSCORES')
  for i = 1, #above, 2 do
    out[#out + 1] = above[i]
    out[#out + 1] = tonumber(above[i + 1])
  end
  out[#out + 1] = base
  out[#out + 1] = 0
  local below = redis.call('ZREVRANGEBYSCORE', registry, '(0', '-inf', 'WITHSCORES')
  for i = 1, #below, 2 do
    out[#out + 1] = below[i]
    out[#out + 1] = tonumber(below[i + 1])
  end
  return out
end

-- Per-queue leases (issue #20): {P}:q:<queue>:leased scores each leased job of the queue
-- (member: its candidate set member) by its lease's end, the same double as its candidate
-- set's score while it is in one; a leased job its claim dropped from its set (its
-- generation exhausted) is scored -inf there: expired, in no set. Every script that leases,
-- renews or ends a lease keeps it exact (delete and purge take finished jobs only: none is
-- in it), so a queue's running leases are one ZCOUNT (queue_room, queue_stats.lua).
-- Layout 3; index_leases.lua builds it for an older store.
local function leases_key(candidates)
  return queue_base(candidates) .. ':leased'
end

-- A queue's busy sets are kept as skiplists. Its leases set holds about one member per busy
-- slot of the fleet, and a fleet of 64 to 128 slots keeps it just under Redis's
-- zset-max-listpack-entries (128): a listpack, whose ZADD reads the entries from the first
-- one on (11 us at 127 members against 1.2 us for a skiplist; 16 workers of 8 slots paid
-- 19-21 us a ZADD, the largest part of a claim's server time: docs/benchmarks.md,
-- nineteenth round). A candidate set with a backlog under 128 jobs is a listpack too, and
-- each claim moves its job's score there. So the candidate set a claim writes, and the
-- leases set a claim or a renewal writes, is made a skiplist once it holds 32 members (below, a listpack costs at most about a microsecond
-- more a ZADD, and a queue that runs a job now and then would make its sets again at each
-- job): a member longer than any zset-max-listpack-value in use, put in and taken out
-- again. Redis keeps a set's skiplist until the set empties (and is deleted); a set made
-- again is made a skiplist again. Looked at once per set and script run.
local SKIPLIST_FROM = 32
local SKIPLIST_MEMBER = string.rep('~', 4097)
local skiplists = {}

local function as_skiplist(key)
  if skiplists[key] then
    return
  end
  skiplists[key] = true
  local encoding = redis.pcall('OBJECT', 'ENCODING', key) -- pcall: as in submit_many.lua
  if (encoding == 'listpack' or encoding == 'ziplist')
    and redis.call('ZCARD', key) >= SKIPLIST_FROM then
    redis.call('ZADD', key, '-inf', SKIPLIST_MEMBER)
    redis.call('ZREM', key, SKIPLIST_MEMBER)
  end
end

local function lease_mark(candidates, member, lease_until_s)
  local key = leases_key(candidates)
  redis.call('ZADD', key, lease_until_s, member)
  as_skiplist(key)
end

local function lease_clear(candidates, member)
  redis.call('ZREM', leases_key(candidates), member)
end

-- The known queues (issue #20): {P}:queues, each queue's own candidate set key to its name,
-- entered by the scripts that make a job live (submit, submit_many, requeue) and left out by
-- queue_stats.lua once the queue has no live job.
local function queue_known(base, name)
  redis.call('HSET', string.match(base, '^(%b{})') .. ':queues', base, name)
end

-- A store's identity (open.lua, identity.lua): make sure the clock key of its store id
-- exists (every script refuses to run without it: see store_now), moving a layout-1 store's
-- clock there, then raise the layout marked in meta to `layout` if it is lower.
local function store_identity(meta, clock, layout1_clock, layout)
  if redis.call('EXISTS', clock) == 0 then
    if redis.call('EXISTS', layout1_clock) == 1 then
      redis.call('RENAME', layout1_clock, clock)
    else
      redis.call('SET', clock, '0')
    end
  end
  local marked = tonumber(redis.call('HGET', meta, 'layout') or '0')
  if marked < layout then
    redis.call('HSET', meta, 'layout', string.format('%d', layout))
  end
end

local function store_now(clock_key, override, write)
  local now
  if override ~= '' then
    now = number_arg('store_clock', override, 0, 1e12)
  else
    local t = redis.call('TIME')
    now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  end
  -- The clock key carries the store's id in its name and exists from the client's connect
  -- on (open.lua). Without it the data this client saw is gone (a restart without
  -- persistence, FLUSHALL, eviction, a failover to a replica that missed it), and the
  -- generations the store issued could be issued again: refuse, before any write.
  local floor = redis.call('GET', clock_key)
  if not floor then
    error({ err = 'STORELOST ' .. clock_key })
  end
  floor = tonumber(floor)
  if floor >= now then
    return floor
  end
  if write then
    redis.call('SET', clock_key, fmt(now))
  end
  return now
end

-- A non-negative decimal integer string below 2^63-1, compared without Lua numbers.
local function below_max(generation)
  if not generation then
    return false
  end
  if #generation ~= #MAX_GENERATION then
    return #generation < #MAX_GENERATION
  end
  return generation < MAX_GENERATION
end

local function row(job)
  return redis.call('HMGET', job, unpack(COLUMNS))
end
local GENERATION = 5 -- COLUMNS[5]

-- A reply to a single-job operation: status, store time, then the job's row (`f`, when the
-- script has read it already).
local function answer(status, now, job, f)
  local reply = f or row(job)
  table.insert(reply, 1, fmt(now))
  table.insert(reply, 1, status)
  return reply
end

local function wake(wake_key)
  if redis.call('LPUSH', wake_key, '1') > WAKE_CAP then
    redis.call('LTRIM', wake_key, 0, WAKE_CAP - 1)
  end
end

-- A job finished (done, dead, or any other final state): wake the clients waiting for it
-- (store.wait), if any registered (wait_job.lua). Their list lives at most a minute.
local function ended(job)
  if redis.call('EXISTS', job .. ':waiting') == 1 then
    local list = job .. ':ended'
    redis.call('LPUSH', list, '1')
    redis.call('EXPIRE', list, 60)
  end
end

-- The attempt history (issue #17): {P}:j:<id>:att, a list of the job's attempts oldest
-- first, each a JSON object: g (generation), o (owner), st (started at), and once over
-- en (ended at), x (how it ended), e (the error or reason). A claim appends one and keeps
-- the newest ATTEMPTS_KEPT (tenure.models.ATTEMPTS_KEPT); the end of the lease completes
-- the last one, in the script that ends it.
local ATTEMPTS_KEPT = 100

-- The last entry is ended by appending its fields to the object's text, not by decoding
-- and encoding it again (2.3 us a completion, most of it cjson's): an entry is cjson's
-- encoding of an object, '{...}', and in it '"en":' can only be the key, for cjson escapes
-- every quote inside a string. `ending` is one of the scripts' own words.
local function attempt_end(job, ending, err, now)
  local key = job .. ':att'
  local last = redis.call('LINDEX', key, -1)
  if not last or string.find(last, '"en":', 1, true) then
    return
  end
  local fields = ',"en":"' .. fmt(now) .. '","x":"' .. ending .. '"'
  if err then
    fields = fields .. ',"e":' .. cjson.encode(err)
  end
  redis.call('LSET', key, -1, string.sub(last, 1, -2) .. fields .. '}')
end

local function attempt_start(job, owner, now, generation)
  local key = job .. ':att'
  local entry = cjson.encode({ g = generation, o = owner, st = fmt(now) })
  if redis.call('RPUSH', key, entry) > ATTEMPTS_KEPT then
    redis.call('LTRIM', key, -ATTEMPTS_KEPT, -1)
  end
end

-- claim.sql's condition; f = HMGET job s g av a m
local function claimable(f, now)
  return (f[1] == 'ready' or f[1] == 'leased')
    and tonumber(f[3]) <= now
    and tonumber(f[4]) < tonumber(f[5])
    and below_max(f[2])
end

-- Generation strings compared as numbers, without Lua numbers (no leading zeros).
local function above(a, b)
  return #a > #b or (#a == #b and a > b)
end

-- The store's generation floor (the highest generation of any job deleted or purged): its
-- key is the store's hash tag (that of any of its keys) followed by ':floor'. Same slot as
-- every key of the store; the scripts that delete name it in KEYS.
local function floor_key(store_key)
  return string.match(store_key, '^(%b{})') .. ':floor'
end

-- The floor as a claim reads it: no claim changes it, so once per script run.
local floor_read = nil
local function store_floor(store_key)
  if floor_read == nil then
    floor_read = redis.call('GET', floor_key(store_key))
  end
  return floor_read
end

local function raise_floor(key, generation)
  local floor = redis.call('GET', key)
  if not floor or above(generation, floor) then
    redis.call('SET', key, generation)
    floor_read = nil
  end
end

-- claim.sql's update: a new generation and an attempt, leased until now + ttl. The new
-- generation is above the floor too, so no deleted job's token is ever issued again.
-- f = HMGET job s g av a m, as claimable read it (this script's writes come after).
-- Returns the job's row as it is now (row); its attempt entry takes the new generation from
-- it.
local function take(job, f, member, candidates, owner, ttl, secret_hash, now)
  local lease_until = fmt(now + ttl)
  if f[1] == 'leased' then
    attempt_end(job, 'lost', nil, now) -- expired, and taken over at a newer generation
  end
  local floor = store_floor(candidates)
  if floor and above(floor, f[2]) then
    redis.call('HSET', job, 'g', floor)
  end
  redis.call('HINCRBY', job, 'g', 1)
  -- Attempts stay below max_attempts, a 32-bit count: exact as a Lua number.
  redis.call('HSET', job, 's', 'leased', 'o', owner, 'h', secret_hash,
    'lu', lease_until, 'av', lease_until, 'u', fmt(now),
    'a', string.format('%d', tonumber(f[4]) + 1))
  redis.call('ZADD', candidates, lease_until, member)
  as_skiplist(candidates)
  lease_mark(candidates, member, lease_until)
  local taken = row(job)
  attempt_start(job, owner, now, taken[GENERATION])
  return taken
end

-- bury.sql: an expired lease on the last allowed attempt; the secret hash is cleared so
-- that the late holder's complete/fail cannot pass for a repeat.
local function bury(job, member, candidates, now)
  redis.call('HSET', job, 's', 'dead', 'u', fmt(now))
  redis.call('HDEL', job, 'h', 'lu')
  redis.call('HSETNX', job, 'e', 'lease expired during the last allowed attempt')
  redis.call('ZREM', candidates, member)
  lease_clear(candidates, member)
  attempt_end(job, 'dead', redis.call('HGET', job, 'e'), now)
  ended(job)
end

-- The condition of renew/complete/release/fail: the caller's lease is the current one and
-- has not expired by store time. Returns the job's candidate set, member and wake list;
-- or nil and whether the job exists (every job has a state), which spares a call to ask.
local function held(job, owner, generation, secret_hash, now)
  local f = redis.call('HMGET', job, 's', 'o', 'g', 'h', 'lu', 'z', 'k', 'w')
  if f[1] == 'leased' and f[2] == owner and f[3] == generation and f[4] == secret_hash
    and f[5] and tonumber(f[5]) > now then
    return f[6], f[7], f[8]
  end
  return nil, f[1] ~= false
end

-- renew.sql for one job: 'applied' (its lease now ends at now + ttl), 'missed' (not the
-- caller's current lease, or expired: nothing changed) or 'missing'. renew and renew_many
-- both run this.
local function renew_job(job, owner, generation, secret_hash, ttl, now)
  local candidates, member = held(job, owner, generation, secret_hash, now)
  if not candidates then
    return member and 'missed' or 'missing' -- held: whether the job exists
  end
  local lease_until = fmt(now + ttl)
  redis.call('HSET', job, 'lu', lease_until, 'av', lease_until, 'u', fmt(now))
  redis.call('ZADD', candidates, lease_until, member)
  lease_mark(candidates, member, lease_until)
  return 'applied'
end

-- complete.sql for one job: 'applied' (now done), 'missed' (not the caller's current
-- lease: nothing changed) or 'missing'. The secret hash gives way to the complete's
-- receipt, so that a repeated complete by the same lease is recognised as a repeat and a
-- release or fail of the ended lease is not. complete and complete_many both run this.
local function complete_job(job, owner, generation, secret_hash, receipt, result, has_result,
    now)
  local candidates, member = held(job, owner, generation, secret_hash, now)
  if not candidates then
    return member and 'missed' or 'missing' -- held: whether the job exists
  end
  local now_s = fmt(now)
  if has_result == '1' then
    redis.call('HSET', job, 's', 'done', 'h', receipt, 'av', now_s, 'u', now_s, 'r', result)
    redis.call('HDEL', job, 'lu')
  else
    redis.call('HSET', job, 's', 'done', 'h', receipt, 'av', now_s, 'u', now_s)
    redis.call('HDEL', job, 'lu', 'r')
  end
  redis.call('ZREM', candidates, member)
  lease_clear(candidates, member)
  attempt_end(job, 'completed', nil, now)
  ended(job)
  return 'applied'
end

-- A job's row for a cjson-encoded reply: NULL as JSON null. Batch replies are one JSON
-- string because redis-py's pure-Python parser pays per element (15 per row), where
-- json.loads reads the whole batch in C. Every field is a Redis string (HMGET answers
-- strings, whatever HINCRBY returned), so generations and times reach Python as the exact
-- text stored: cjson never sees a Lua number.
local function as_json(f)
  for i = 1, #COLUMNS do
    if not f[i] then
      f[i] = cjson.null
    end
  end
  return f
end

local function json_row(job)
  return as_json(row(job))
end

-- complete_many's loop: complete `count` jobs as complete does (complete_job), the jobs
-- KEYS[k], KEYS[k + 1], ..., each with COMPLETION_ARGS ARGV from ARGV[a] on: owner,
-- generation, secret hash, receipt, result, has result. Appends to `out` one item per
-- completion, in order: ["applied"], ["missed", <row as it is now>] or ["missing"]. An
-- applied completion's row tells its caller nothing it did not send (the job is done with
-- that result): left out, a batch's reply is about half as long to encode, send and decode.
local COMPLETION_ARGS = 6
local function complete_each(out, k, count, a, now)
  for n = 0, count - 1 do
    local job, i = KEYS[k + n], a + COMPLETION_ARGS * n
    local status = complete_job(job, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
      ARGV[i + 4], ARGV[i + 5], now)
    if status == 'missing' or status == 'applied' then
      out[#out + 1] = { status }
    else
      local item = json_row(job)
      table.insert(item, 1, status)
      out[#out + 1] = item
    end
  end
end

-- renew_many's loop, in two passes: RENEWAL_ARGS ARGV per renewal from ARGV[a] on (owner,
-- generation, secret hash, ttl). renewal_ttls checks every ttl, before the script's first
-- write (store_now's floor included), so a refused one writes nothing; renew_each then
-- renews `count` jobs as renew does (renew_job), the jobs KEYS[k], KEYS[k + 1], ..., and
-- appends to `out` one item per renewal, in order: ["applied", <row as renewed>],
-- ["missed", <row as it is now>] or ["missing"]. An applied renewal's row is kept (unlike
-- complete_each's): its caller builds the new lease from it.
local RENEWAL_ARGS = 4
local function renewal_ttls(count, a)
  local ttls = {}
  for n = 0, count - 1 do
    ttls[n + 1] = ttl_arg(ARGV[a + RENEWAL_ARGS * n + 3])
  end
  return ttls
end

local function renew_each(out, k, count, a, ttls, now)
  for n = 0, count - 1 do
    local job, i = KEYS[k + n], a + RENEWAL_ARGS * n
    local status = renew_job(job, ARGV[i], ARGV[i + 1], ARGV[i + 2], ttls[n + 1], now)
    if status == 'missing' then
      out[#out + 1] = { status }
    else
      local item = json_row(job)
      table.insert(item, 1, status)
      out[#out + 1] = item
    end
  end
end

-- Fleet-wide queue limits (issue #18): how many more jobs the queue of the candidate set
-- `candidates` (the queue's own set, priority 0) may lease at `now`: its limit (a field of
-- the hash `limits`, "<n> <name>") minus its running leases, never below 0; nil when the
-- queue has no limit. Running leases are the members of the queue's leases set scored after
-- now (issue #20: one ZCOUNT, whatever the number held).
local function queue_room(limits, candidates, now)
  local limit = redis.call('HGET', limits, candidates)
  if not limit then
    return nil
  end
  limit = tonumber(string.match(limit, '^(%d+)'))
  local count = redis.call('ZCOUNT', leases_key(candidates), '(' .. fmt(now), '+inf')
  return math.max(limit - count, 0)
end

-- Fleet-wide queue rates (issue #18): the token bucket of the queue of the candidate set
-- `candidates` (a field of the hash `rates`, "<per_second> <burst> <tokens> <at> <name>":
-- it held <tokens> at store time <at>), refilled to `now` (at most <burst>); nil when the
-- queue has no rate.
local function bucket(rates, candidates, now)
  local value = redis.call('HGET', rates, candidates)
  if not value then
    return nil
  end
  local rate, burst, tokens, at, name = string.match(value, '^(%S+) (%S+) (%S+) (%S+) (.*)$')
  rate, burst, tokens, at = tonumber(rate), tonumber(burst), tonumber(tokens), tonumber(at)
  return { rate = rate, burst = burst, name = name, at = math.max(at, now),
    tokens = math.min(burst, tokens + math.max(now - at, 0) * rate) }
end

-- The whole tokens of a bucket: a token due within 1e-5 s counts as there, forgiving the
-- rounding of store times (doubles of epoch seconds step by 2.4e-7 s), so a client whose
-- wait ends when the next token is due (wait.lua) finds it.
local function bucket_room(b)
  return math.floor(b.tokens + 1e-5 * b.rate)
end

-- A lease granted in a rate-limited queue takes one token of its bucket `b` (from
-- `bucket`), written back at once.
local function spend_token(rates, candidates, b)
  b.tokens = b.tokens - 1
  redis.call('HSET', rates, candidates,
    fmt(b.rate) .. ' ' .. b.burst .. ' ' .. fmt(b.tokens) .. ' ' .. fmt(b.at) .. ' ' .. b.name)
end

-- pick.sql: the due candidate with the highest priority, then the lowest (available_at,
-- submission order), across the queues whose own candidate sets are KEYS[k] to KEYS[#KEYS],
-- except the paused ones (the hash `paused`) and the limited ones without room (`room`,
-- from queue_room), the first queue winning a tie. Per queue its priority levels are tried
-- from the highest down, and the first due candidate ends that queue's walk (a lower level
-- cannot beat it), as does a level below the best found in an earlier queue. Returns its
-- set and member, or nil. `walks` keeps each queue's sets (queue_sets), or false for a
-- paused queue, for the script's later picks: no claim changes either.
local function oldest(k, now_s, paused, room, walks)
  local best_set, best_member, best_priority, best_score, best_seq
  for i = k, #KEYS do
    local sets = walks[KEYS[i]]
    if sets == nil then
      -- A paused queue's sets are left out (its own set key is a field of `paused`).
      sets = redis.call('HEXISTS', paused, KEYS[i]) == 0 and queue_sets(KEYS[i])
      walks[KEYS[i]] = sets
    end
    -- So are those of a limited queue without room.
    if sets and (room[KEYS[i]] or 1) > 0 then
      for n = 1, #sets, 2 do
        local set, priority = sets[n], sets[n + 1]
        if best_priority ~= nil and priority < best_priority then
          break
        end
        local found = redis.call('ZRANGEBYSCORE', set, '-inf', now_s, 'WITHSCORES', 'LIMIT', 0, 1)
        if found[1] then
          local score = tonumber(found[2])
          local seq = tonumber(string.sub(found[1], 1, 16), 16)
          if best_priority == nil or priority > best_priority
            or (score < best_score or (score == best_score and seq < best_seq)) then
            best_set, best_member, best_priority, best_score, best_seq =
              set, found[1], priority, score, seq
          end
          break
        elseif priority ~= 0 and redis.call('EXISTS', set) == 0 then
          redis.call('ZREM', KEYS[i] .. ':pri', set) -- emptied: no job of that priority left
        end
      end
    end
  end
  return best_set, best_member
end

-- claim_next's loop: for each secret hash ARGV[a] to ARGV[#ARGV], claim the oldest
-- claimable job of the candidate sets KEYS[k] to KEYS[#KEYS] (oldest), a paused queue's
-- left out, a limited queue's (the hash `limits`) only while it has room, a rate-limited
-- one's (the hash `rates`) only while its bucket holds a whole token. Expired leases on
-- their last attempt met on the way are buried (bury.sql) and the pick goes on. Appends to
-- `out` one item per lease granted, ["applied", <row>], and per job buried, ["buried", <row>].
local function claim_each(out, k, a, owner, ttl, job_prefix, now, paused, limits, rates)
  local now_s = fmt(now)
  -- Queue limits and rates: each limited queue's room (the smaller of its places and its
  -- bucket's whole tokens), counted once in this script and spent by each claim below.
  local room, buckets = {}, {}
  for i = k, #KEYS do
    room[KEYS[i]] = queue_room(limits, KEYS[i], now)
    local b = bucket(rates, KEYS[i], now)
    if b then
      buckets[KEYS[i]] = b
      room[KEYS[i]] = math.min(room[KEYS[i]] or math.huge, bucket_room(b))
    end
  end
  local walks = {}
  for i = a, #ARGV do
    while true do
      local candidates, member = oldest(k, now_s, paused, room, walks)
      if candidates == nil then
        return
      end
      local job = job_prefix .. string.sub(member, 17)
      local f = redis.call('HMGET', job, 's', 'g', 'av', 'a', 'm')
      if not f[1] or not below_max(f[2]) then
        -- Never claimable again (pick.sql leaves out exhausted generations).
        redis.call('ZREM', candidates, member)
        if f[1] == 'leased' then
          lease_mark(candidates, member, '-inf') -- still leased (expired), in no set now
        end
      elseif f[1] == 'leased' and tonumber(f[4]) >= tonumber(f[5]) then
        bury(job, member, candidates, now)
        local item = json_row(job)
        table.insert(item, 1, 'buried')
        out[#out + 1] = item
      else
        if claimable(f, now) then
          local item = as_json(take(job, f, member, candidates, owner, ttl, ARGV[i], now))
          local base = queue_base(candidates) -- the room is the queue's, whatever the priority
          if room[base] then
            room[base] = room[base] - 1
          end
          if buckets[base] then -- a job buried above takes no token
            spend_token(rates, base, buckets[base])
          end
          table.insert(item, 1, 'applied')
          out[#out + 1] = item
        end
        break
      end
    end
  end
end

-- Whether `state` is one of ARGV[first] to ARGV[#ARGV] (the states an operation takes).
local function takes(state, first)
  for i = first, #ARGV do
    if state == ARGV[i] then
      return true
    end
  end
  return false
end

-- Delete a job's hash and its members of the candidate and listing sets; `all_jobs` is the
-- listing of every job. Raises the floor (at `floor`) to its generation first.
local function remove_job(job, all_jobs, floor)
  local f = redis.call('HMGET', job, 'g', 'z', 'k', 'ux')
  raise_floor(floor, f[1])
  -- A deleted or purged job gives its unique key up (issue #18): nothing holds it then.
  if f[4] and redis.call('GET', f[4]) == job then
    redis.call('DEL', f[4])
  end
  redis.call('ZREM', f[2], f[3])
  redis.call('ZREM', (string.gsub(queue_base(f[2]), '^(%b{}):q:', '%1:l:')), f[3])
  redis.call('ZREM', all_jobs, f[3])
  redis.call('DEL', job, job .. ':att')
end

-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- Unique jobs (issue #18). {P}:u:<key> names the job (its hash's key) that last took the
-- unique key; the job's hash keeps 'uk' (the key), 'ux' (that pointer's name) and 'uf' (its
-- window after it finishes, absent: none). The job holds the key while the pointer names it
-- and it is unfinished, or finished ('u': when) less than 'uf' seconds ago.

-- The job key holding `ukey` at `now`, or nil when the key is free.
local function unique_holder(ukey, now)
  local holder = redis.call('GET', ukey)
  if not holder then
    return nil
  end
  local f = redis.call('HMGET', holder, 's', 'u', 'uf', 'ux')
  if not f[1] or f[4] ~= ukey then
    return nil -- deleted, or its id submitted again without this key
  end
  if f[1] == 'ready' or f[1] == 'leased' then
    return holder
  end
  if f[3] and tonumber(f[2]) + tonumber(f[3]) > now then
    return holder
  end
  return nil
end

-- The new job `job` takes `ukey` (whose text is `key`) with window `window` ('' or nil:
-- none).
local function unique_take(job, ukey, key, window)
  redis.call('SET', ukey, job)
  redis.call('HSET', job, 'uk', key, 'ux', ukey)
  if window and window ~= '' then
    redis.call('HSET', job, 'uf', window)
  end
end
