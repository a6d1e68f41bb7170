-- claim_next: for each secret hash, claim the oldest claimable job of the queues (claim_each,
-- pick.sql); expired leases on their last attempt met on the way are buried (bury.sql).
-- KEYS: clock, the paused queues (hash), the queue limits (hash), the queue rates (hash),
--       then the candidate set of each queue
-- ARGV: now override, owner, ttl, job key prefix, then one secret hash per lease wanted
-- Reply: one JSON string (see json_row): [now, item, item, ...], one item per lease granted
-- or job buried (see claim_each).
local ttl = ttl_arg(ARGV[3])
local now = store_now(KEYS[1], ARGV[1], true)
local reply = { fmt(now) }
claim_each(reply, 5, 5, ARGV[2], ttl, ARGV[4], now, KEYS[2], KEYS[3], KEYS[4])
return cjson.encode(reply)
