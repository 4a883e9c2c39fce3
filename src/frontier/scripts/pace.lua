-- Reserve the next politeness slot of host ARGV[1] for the whole cluster,
-- for a request leased before its host was slowed down: a Crawl-delay
-- learnt since, or an adaptive back-off its worker saw first. The spacing
-- the worker asks for (ARGV[4]) holds even if the host's entry in the
-- Crawl-delays has gone with its expired robots.txt record (sweep.lua),
-- or the back-off has not reached Redis yet.
--
-- KEYS: 1 politeness slots, 2 host crawl delays, 3 adaptive back-off
-- ARGV: 1 host, 2 interval ms, 3 randomise it (1/0), 4 spacing ms
-- Returns the ms to wait.
local wait = reserve_slot(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', now_ms(), 1,
  tonumber(ARGV[4] or '0'))
flush_hosts()
return wait
