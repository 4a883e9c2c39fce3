-- Lease up to ARGV[3] requests for worker ARGV[1] for ARGV[2] ms, after
-- returning expired leases (of any worker) to the queue. When fewer than
-- asked for are queued (or none were asked for), also peek at up to ARGV[5]
-- start entries, so the worker can claim them without another round trip.
--
-- KEYS: 1 requests (zset of ids), 2 request data (hash id -> JSON),
--       3 in-flight (zset id -> deadline ms), 4 lease owners (hash),
--       5 dead letters (list), 6 stats (hash), 7 start key
-- ARGV: 1 worker, 2 lease ms, 3 max, 4 start key type, 5 start peek count
-- Returns {{id1, json1, id2, json2, ...}, {start entries}}.
local worker, lease_ms, max = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
requeue_expired(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], now)
local out = {}
lease_requests(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], worker, lease_ms, max, now, out)
local start = {}
if #out / 2 < max or max == 0 then
  start = peek_start(KEYS[7], ARGV[4], tonumber(ARGV[5]))
end
return {out, start}
