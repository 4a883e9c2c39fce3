-- Reserve the next politeness slot of host ARGV[1] for the whole cluster,
-- for a request leased before its host was slowed down: a Crawl-delay
-- learnt since, or an adaptive back-off its worker saw first. The spacing
-- the worker asks for (ARGV[4]) holds even if the host's entry in the
-- Crawl-delays has gone with its expired robots.txt record (sweep.lua),
-- or the back-off has not reached Redis yet.
--
-- The slot is no sooner than ARGV[5] ms from now: a Retry-After the
-- worker heard before its commit reached Redis, so the requests it holds
-- back do not all go when it ends, but a spacing apart from then.
--
-- A slot more than ARGV[6] ms away (unless negative) is not reserved, as
-- lease.lua leases no request whose slot is that far: the worker hands
-- the request back, and a slot nobody would take leaves no hole in the
-- host's schedule.
--
-- KEYS: 1 politeness slots, 2 host crawl delays, 3 adaptive back-off
-- ARGV: 1 host, 2 interval ms, 3 randomise it (1/0), 4 spacing ms,
--       5 hold ms, 6 longest wait worth reserving (ms; -1: any)
-- Returns the ms to wait, or -1 if the slot was too far to reserve.
local now = now_ms()
local hold = tonumber(ARGV[5] or '0')
local limit = tonumber(ARGV[6] or '-1')
if limit >= 0 and math.max(hold, host_get(KEYS[1], ARGV[1]) - now) > limit then
  return -1
end
local wait = reserve_slot(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', now + hold, 1,
  tonumber(ARGV[4] or '0'))
flush_hosts()
return wait + hold
