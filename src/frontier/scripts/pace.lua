-- Reserve the next politeness slot of host ARGV[1] for the whole cluster
-- (for a request leased before its host's Crawl-delay was known).
--
-- KEYS: 1 politeness slots, 2 host crawl delays, 3 adaptive back-off
-- ARGV: 1 host, 2 interval ms, 3 randomise it (1/0)
-- Returns the ms to wait.
local wait = reserve_slot(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', now_ms(), 1)
flush_hosts()
return wait
