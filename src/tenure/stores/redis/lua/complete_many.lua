-- complete_many: complete each job as complete does (complete_job), all in this one run, at
-- one store time. Each completion is checked on its own: stale ones change nothing.
-- KEYS: clock, then the job key of each completion
-- ARGV: now override, then for each completion: owner, generation, secret hash, result,
--       has result
-- Reply: one JSON string (see json_row): [now, item, item, ...], one item per completion in
-- order: ["applied", <row>], ["missed", <row as it is now>] or ["missing"].
local now = store_now(KEYS[1], ARGV[1], true)
local reply = { fmt(now) }
for i = 2, #KEYS do
  local job, a = KEYS[i], (i - 2) * 5 + 1
  local status = complete_job(job, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4],
    ARGV[a + 5], now)
  if status == 'missing' then
    reply[i] = { 'missing' }
  else
    local item = json_row(job)
    table.insert(item, 1, status)
    reply[i] = item
  end
end
return cjson.encode(reply)
