-- renew_many: renew each lease as renew does (renew_each), all in this one run, at one store
-- time, each with its own ttl. Each renewal is checked on its own: stale ones change nothing.
-- Every ttl is checked before the first write (renewal_ttls).
-- KEYS: clock, then the job key of each renewal
-- ARGV: now override, then for each renewal: owner, generation, secret hash, ttl
-- Reply: one JSON string (see json_row): [now, item, item, ...], one item per renewal in
-- order: ["applied", <row as renewed>], ["missed", <row as it is now>] or ["missing"].
local count = #KEYS - 1
local ttls = renewal_ttls(count, 2)
local now = store_now(KEYS[1], ARGV[1], true)
local reply = { fmt(now) }
renew_each(reply, 2, count, 2, ttls, now)
return cjson.encode(reply)
