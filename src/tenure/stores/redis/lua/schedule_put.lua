-- add_schedule: insert or replace the schedule by name, by store time. The hash's value is
-- "<created_at> <updated_at> <spec JSON>" (the spec as the client encoded it, kept as text
-- so that no number of it goes through cjson); a replaced schedule keeps its created_at.
-- KEYS: clock, the schedules hash
-- ARGV: now override, the schedule's name, its spec (JSON text)
local now_s = fmt(store_now(KEYS[1], ARGV[1], true))
local created_s = now_s
local old = redis.call('HGET', KEYS[2], ARGV[2])
if old then
  created_s = string.match(old, '^(%S+)')
end
local value = created_s .. ' ' .. now_s .. ' ' .. ARGV[3]
redis.call('HSET', KEYS[2], ARGV[2], value)
return value
