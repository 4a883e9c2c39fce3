-- Lease up to ARGV[3] requests for worker ARGV[1] for ARGV[2] ms, after
-- returning expired leases (of any worker), due retries and due revisits
-- to the queue. Each leased request gets its host's next politeness slot,
-- for the whole cluster. When fewer than asked for are queued (or none
-- were asked for), also peek at up to ARGV[5] start entries, so the worker
-- can claim them without another round trip.
--
-- KEYS: 1 requests (zset of ids), 2 request data (hash id -> JSON),
--       3 in-flight (zset id -> deadline ms), 4 lease owners (hash),
--       5 dead letters, 6 stats, 7 delayed retries (zset id -> due ms),
--       8 their queue scores (hash), 9 politeness slots (hash host -> ms),
--       10 host crawl delays (hash), 11 adaptive back-off (hash),
--       12 sequence, 13 revisit schedule (zset fingerprint -> due ms),
--       14 its requests (hash fingerprint -> JSON), 15 revisits queued and
--       not yet fetched (zset fingerprint -> due ms), 16 crawl control
--       (hash), 17 pages leased per host (hash), 18 start key, 19 items
--       (for a stream sink's back-pressure)
-- ARGV: 1 worker, 2 lease ms, 3 max, 4 start key type, 5 start peek count,
--       6 politeness interval ms, 7 randomise it (1/0), 8 longest
--       politeness wait worth leasing for (ms), 9 max_pages (0: none),
--       10 max_pages_per_host (0: none), 11 item sink (see item_sink)
-- Returns {{id1, json1, wait1, interval1, ...}, {start entries}, ms until
-- the next work nothing will announce may be due (see next_due; -1: none
-- known)}.
local K = shared_keys()
K.items, K.sink = KEYS[19], item_sink(ARGV[11])
local max = tonumber(ARGV[3])
-- Proved once the lease is about to write (see before_write); the start
-- key too, which is read after the writes.
write_checks = function()
  need(KEYS[18], ARGV[4], 'start_urls')
  need_lease_keys(K, tonumber(ARGV[10]), true)
end
local now = now_ms()
local out = {}
lease_requests(K, ARGV[1], tonumber(ARGV[2]), max, now, tonumber(ARGV[6]), ARGV[7] == '1', tonumber(ARGV[8]),
  tonumber(ARGV[9]), tonumber(ARGV[10]), true, out)
flush_hosts()
flush_tally(K.stats)
local start = {}
if #out / 4 < max or max == 0 then
  start = peek_start(KEYS[18], ARGV[4], tonumber(ARGV[5]))
end
return {out, start, next_due(K, now)}
