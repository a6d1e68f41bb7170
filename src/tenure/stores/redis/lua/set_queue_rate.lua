-- set_queue_rate: set or clear the queue's token bucket, a field of the queue rates hash
-- named by the queue's candidate set key (what the claim scripts hold), valued
-- "<per_second> <burst> <tokens> <at> <name>" (see _lib.lua's bucket). A new or changed
-- rate starts full at store time; the same rate set again keeps the bucket as it is, so
-- setting it twice is setting it once. It pushes a wake-up onto the queue's wake list, so
-- idle clients of it look at once.
-- KEYS: clock, the queue rates (hash), the queue's candidate set, its wake list
-- ARGV: now override, the queue's name, per_second and burst ('' and '' to clear)
if ARGV[3] == '' then
  store_now(KEYS[1], ARGV[1], false)
  redis.call('HDEL', KEYS[2], KEYS[3])
else
  local rate = number_arg('per_second', ARGV[3], 1e-300, 1000000)
  local burst = number_arg('burst', ARGV[4], 1, 1000000)
  local now = store_now(KEYS[1], ARGV[1], false)
  local b = bucket(KEYS[2], KEYS[3], now)
  if not (b and b.rate == rate and b.burst == burst) then
    redis.call('HSET', KEYS[2], KEYS[3],
      fmt(rate) .. ' ' .. ARGV[4] .. ' ' .. ARGV[4] .. ' ' .. fmt(now) .. ' ' .. ARGV[2])
  end
end
wake(KEYS[4])
return 1
