-- complete_many: complete each job as complete does (complete_each), all in this one run, at
-- one store time. Each completion is checked on its own: stale ones change nothing.
-- KEYS: clock, then the job key of each completion
-- ARGV: now override, then for each completion: owner, generation, secret hash, receipt,
--       result, has result
-- Reply: one JSON string (see json_row): [now, item, item, ...], one item per completion in
-- order: ["applied"], ["missed", <row as it is now>] or ["missing"] (see complete_each).
local now = store_now(KEYS[1], ARGV[1], true)
local reply = { fmt(now) }
complete_each(reply, 2, #KEYS - 1, 2, now)
return cjson.encode(reply)
