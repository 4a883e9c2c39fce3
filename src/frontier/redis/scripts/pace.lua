-- Reserve the next politeness slot of host A.host for the whole cluster,
-- for a request leased before its host was slowed down: a Crawl-delay
-- learnt since, or an adaptive back-off its worker saw first. The spacing
-- the worker asks for (A.spacing_ms) holds even if the host's entry in the
-- Crawl-delays has gone with its expired robots.txt record (sweep.lua),
-- or the back-off has not reached Redis yet.
--
-- The slot is no sooner than A.hold_ms from now: a Retry-After the
-- worker heard before its commit reached Redis, so the requests it holds
-- back do not all go when it ends, but a spacing apart from then.
--
-- A slot more than A.limit_ms away (unless negative) is not reserved, as
-- lease.lua leases no request whose slot is that far: the worker hands
-- the request back, and a slot nobody would take leaves no hole in the
-- host's schedule.
--
-- Keys and arguments: `pace` in protocol.rs.
-- Returns the ms to wait, or -1 if the slot was too far to reserve.
local now = now_ms()
local hold = tonumber(A.hold_ms or '0')
local limit = tonumber(A.limit_ms or '-1')
if limit >= 0 and math.max(hold, host_get(K.pace, A.host) - now) > limit then
  return -1
end
local wait = reserve_slot(K.pace, K.host_delay, K.backoff, A.host, tonumber(A.interval_ms), A.jitter == '1', now + hold,
  1, tonumber(A.spacing_ms or '0'))
flush_hosts()
return wait + hold
