-- Queue part of a page's links ahead of its commit. A page with more links
-- than one script call should carry (a sitemap of 600,000 URLs) sends
-- them in parts, so that no call holds Redis for long; its commit follows
-- with the rest, its items and its outcome. Only while worker A.worker
-- still holds the page's lease (A.id), as a commit.
--
-- Only links with a fingerprint come here, never a dont_filter one: if
-- the worker dies before the commit, the page is fetched again and the
-- dupefilter filters what its parts queued already, so nothing is queued
-- twice (a dont_filter link would be, so it waits for the commit).
--
-- Keys, arguments and records: `links_ahead` in protocol.rs; the LINK
-- records follow the head arguments. Returns {1, enqueued, filtered}, or
-- {-1} (writing nothing) when the lease is no longer this worker's.
local worker = A.worker
local owner = prove_by('hash', 'leases', 'HGET', K.leases, A.id)
if not owned_by(owner, worker) then
  return {-1}
end
local link = {size = LINK.SIZE, fingerprint = LINK.fingerprint, priority = LINK.priority, json = LINK.json}
local n = (#ARGV - REST + 1) / LINK.SIZE
local dupe = dupe_config(A.dupe_spec, K.dupefilter, K.dupefilter_meta)
local now = now_ms()
local gate = link_gate(dupe, link_fingerprints(REST, n, link, {}), now)
read_stats(K.stats, {STAT.SCHEDULER_ENQUEUED, STAT.DUPEFILTER_FILTERED, STAT.REQUEST_DEPTH_MAX})
need(K.requests, 'zset', 'requests')
need(K.request_data, 'hash', 'request_data')
need(K.inflight, 'zset', 'inflight')
need(K.crew, 'zset', 'crew')
need(K.waiting, 'hash', 'waiting')
need_dupe(dupe)

local next_seq = seq_block(K.sequence, n, true)
local queue_args, data_args = {}, {}
local enqueued, filtered = queue_links(REST, n, link, gate, next_seq, queue_args, data_args)
gate.record()
call_many('ZADD', K.requests, queue_args)
call_many('HSET', K.request_data, data_args)
count(STAT.SCHEDULER_ENQUEUED, enqueued)
count(STAT.DUPEFILTER_FILTERED, filtered)
local depth = tonumber(A.depth)
if enqueued > 0 and depth > stat_values[STAT.REQUEST_DEPTH_MAX] then
  redis.call('HSET', K.stats, STAT.REQUEST_DEPTH_MAX, int(depth))
end
-- The workers waiting for work start on these now, not after the commit.
if enqueued > 0 then
  hand_waiting(K, A.wake, enqueued, fair_room(K, worker, 0, now))
end
flush_tally(K.stats)
return {1, enqueued, filtered}
