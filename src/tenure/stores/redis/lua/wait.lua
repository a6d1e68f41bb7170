-- wait: before an idle client blocks on its queues' wake lists, drop the stale wake-ups
-- (what they announced is visible below) and say when the next job falls due
-- (next_due.sql): a client blocks at most until then.
-- KEYS: clock, then the candidate set of each queue, then the wake list of each queue, then
--       the paused queues (hash): a paused queue's jobs fall due for nobody, then the queue
--       limits (hash): a limited queue without room falls due when the first of its members
--       scored after now does (its first running lease's end, or a job due before it), then
--       the queue rates (hash): a rate-limited queue without a whole token falls due no
--       sooner than its next token
-- ARGV: now override, number of queues
-- Reply: { now, earliest available_at or false }
local now = store_now(KEYS[1], ARGV[1], false)
local queues = tonumber(ARGV[2])
local due
for i = 2, queues + 1 do
  if redis.call('HEXISTS', KEYS[2 * queues + 2], KEYS[i]) == 0 then
    local full = queue_room(KEYS[2 * queues + 3], KEYS[i], now) == 0
    local b = bucket(KEYS[2 * queues + 4], KEYS[i], now)
    local token = -math.huge
    if b and bucket_room(b) < 1 then
      token = b.at + (1 - b.tokens) / b.rate
    end
    local sets = queue_sets(KEYS[i]) -- every priority's set of the queue
    for n = 1, #sets, 2 do
      local first
      if full then -- only a running lease's end can make room
        first = redis.call('ZRANGEBYSCORE', sets[n], '(' .. fmt(now), '+inf', 'WITHSCORES',
          'LIMIT', 0, 1)
      else
        first = redis.call('ZRANGE', sets[n], 0, 0, 'WITHSCORES')
      end
      if first[1] then
        local score = math.max(tonumber(first[2]), token)
        if due == nil or score < due then
          due = score
        end
      end
    end
  end
  redis.call('DEL', KEYS[i + queues])
end
if due == nil then
  return { fmt(now), false }
end
return { fmt(now), fmt(due) }
