-- set_queue_limit: set or clear the queue's limit (idempotent), a field of the queue limits
-- hash named by the queue's candidate set key (what the claim scripts hold), valued
-- "<n> <name>". It pushes a wake-up onto the queue's wake list, so idle clients of it
-- look at once (a raised or cleared limit may make room).
-- KEYS: the queue limits (hash), the queue's candidate set, its wake list
-- ARGV: the queue's name, the limit ('' to clear)
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], KEYS[2])
else
  number_arg('limit', ARGV[2], 1, 1000000)
  redis.call('HSET', KEYS[1], KEYS[2], ARGV[2] .. ' ' .. ARGV[1])
end
wake(KEYS[3])
return 1
