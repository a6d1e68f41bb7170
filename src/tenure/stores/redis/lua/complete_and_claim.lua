-- complete_and_claim: complete_many then claim_next in this one run, at one store time: each
-- completion is checked on its own (complete_each), then the claim (claim_each) sees the
-- store as the completions left it.
-- KEYS: clock, the paused queues (hash), the queue limits (hash), the queue rates (hash),
--       then the job key of each completion, then the candidate set of each queue
-- ARGV: now override, owner, ttl, job key prefix, number of completions n, then for each
--       completion: owner, generation, secret hash, receipt, result, has result; then one
--       secret hash per lease wanted
-- Reply: one JSON string (see json_row): [now, item, ...]: first n items, one per
-- completion in order, as complete_many answers them, then the claim's items, as
-- claim_next answers them. (Flat: cjson would encode an empty nested list as {}.)
local ttl = ttl_arg(ARGV[3])
local n = number_arg('completions', ARGV[5], 0, #KEYS - 4)
local now = store_now(KEYS[1], ARGV[1], true)
local reply = { fmt(now) }
complete_each(reply, 5, n, 6, now)
claim_each(reply, 5 + n, 6 + COMPLETION_ARGS * n, ARGV[2], ttl, ARGV[4], now, KEYS[2], KEYS[3],
  KEYS[4])
return cjson.encode(reply)
