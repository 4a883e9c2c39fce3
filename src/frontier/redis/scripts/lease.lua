-- Lease up to A.max requests for worker A.worker for A.lease_ms, after
-- returning expired leases (of any worker), due retries and due revisits
-- to the queue. Each leased request gets its host's next politeness slot,
-- for the whole cluster. When fewer than asked for are queued (or none
-- were asked for), also peek at up to A.peek start entries, so the worker
-- can claim them without another round trip. No more than the worker's
-- fair share is leased (see fair_room), and what it asked for and did not
-- get is noted, for a commit that queues work to wake it. A worker
-- joining the crew with less than it asked for tells its peers on A.wake
-- (see announce_joined). A worker of a sharded spider visiting this shard
-- (A.visit not 'home': its home is another, see frontier::redis::sharded)
-- leases within a share as one more of the crew but does not join it, so
-- the shard's own workers keep their shares. One whose home had nothing
-- for it ('waits') is noted as waiting for the shard's work, as a member
-- is, for a lease (note_waiting); one filling idle slots beside its
-- home's work ('fills') is not, so the shard's commits do not hand it
-- more.
--
-- Keys and arguments: `lease` in protocol.rs.
-- Returns {{id1, json1, wait1, interval1, ...}, {start entries}, ms until
-- the next work nothing will announce may be due (see next_due; -1: none
-- known), the requests in flight (leased by any worker, this one's new
-- leases included)}.
K.sink = item_sink(A.sink)
local max = num(A.max)
-- Proved once the lease is about to write (see before_write); the start
-- key too, which is read after the writes.
write_checks = function()
  need(K.start_urls, A.start_kind, 'start_urls')
  need_lease_keys(K, num(A.max_per_host), true)
  need(K.waiting, 'hash', 'waiting')
end
local now = now_ms()
local out = {}
local max_pages = page_cap(K, num(A.max_pages), A.quota_shard)
local fair = lease_requests(K, A.worker, num(A.lease_ms), max, now, num(A.interval_ms), A.jitter == '1', num(A.max_wait_ms),
  max_pages, num(A.max_per_host), true, num(A.max_lease_expiries), num(A.held), out)
-- What it did not get, a commit that queues work wakes it for; until
-- then (or the next_due below) it does not ask again. A worker that takes
-- handed leases waits for no more than its fair share: a commit leases
-- to it without knowing what it holds.
local takes = A.takes_handed == '1'
local visiting = A.visit ~= 'home'
local waits = A.visit ~= 'fills'
note_waiting(K, A.worker, waits and (takes and math.max(1, fair) or max) - #out / 4 or 0, takes,
  visiting and now + num(A.lease_ms) or nil)
if #out / 4 < max and not visiting then
  announce_joined(K, A.worker, A.wake, now)
end
-- Parked requests its release put back and it did not lease: the
-- workers waiting for work are woken for them.
if PARKING.back > #out / 4 then
  hand_waiting(K, A.wake, PARKING.back - #out / 4, math.huge, A.worker)
end
if not visiting then
  crew_renew(K, A.worker, now, num(A.lease_ms), true)
end
flush_hosts()
flush_tally(K.stats)
local start = {}
if #out / 4 < max or max == 0 then
  start = peek_start(K.start_urls, A.start_kind, num(A.peek))
end
return {out, start, next_due(K, now), prove_by('zset', 'inflight', 'ZCARD', K.inflight)}
