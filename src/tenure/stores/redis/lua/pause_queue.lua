-- pause_queue / resume_queue: set the queue's paused flag (idempotent). A resume pushes a
-- wake-up onto the queue's wake list, so idle clients of it look at once.
-- KEYS: the paused queues (hash), the queue's candidate set, its wake list
-- ARGV: the queue's name, "1" to pause or "0" to resume
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], KEYS[2], ARGV[1])
else
  redis.call('HDEL', KEYS[1], KEYS[2])
  wake(KEYS[3])
end
return 1
