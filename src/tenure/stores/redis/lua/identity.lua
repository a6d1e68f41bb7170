-- identity: the store's identity (store_identity) at a given layout. Run once an older
-- store's leases are indexed, to mark it the current layout (open.lua does the rest).
-- KEYS: meta, the store id's clock, the layout-1 clock
-- ARGV: layout version
store_identity(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]))
return 1
