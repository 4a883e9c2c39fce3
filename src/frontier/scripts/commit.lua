-- Commit one page: release its lease and, in the same atomic step, enqueue
-- its new requests (deduplicated), push its items, record a failure or a
-- dead letter, and count its stats. Does nothing unless worker ARGV[1]
-- still holds the lease on request ARGV[2]: a page is committed once.
-- Then lease up to ARGV[10] requests to replace it, so a busy worker needs
-- one round trip per page.
--
-- KEYS: 1 requests, 2 request data, 3 in-flight, 4 lease owners,
--       5 dupefilter, 6 sequence, 7 items, 8 stats, 9 dead letters,
--       10 failed
-- ARGV: 1 worker, 2 request id, 3 wake channel, 4 #requests, 5 #items,
--       6 #stat pairs, 7 depth of the new requests, 8 dead-letter JSON or
--       '', 9 failed JSON or '', 10 requests to lease next, 11 lease ms,
--       then #requests triples (fingerprint, priority, JSON), #items JSON
--       strings, #stat pairs (field, delta).
-- Returns {enqueued, filtered, id1, json1, ...} (the new leases), or
-- {-1, 0} when the lease was lost.
local worker, id, channel = ARGV[1], ARGV[2], ARGV[3]
local n_requests, n_items, n_stats = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local depth = tonumber(ARGV[7])

if not owned_by(redis.call('HGET', KEYS[4], id), worker) then
  return {-1, 0}
end
redis.call('ZREM', KEYS[3], id)
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[2], id)

if ARGV[8] ~= '' then
  redis.call('RPUSH', KEYS[9], ARGV[8])
end
if ARGV[9] ~= '' then
  redis.call('RPUSH', KEYS[10], ARGV[9])
end

local at = 12
local enqueued, filtered = 0, 0
for _ = 1, n_requests do
  if enqueue(KEYS[1], KEYS[2], KEYS[5], KEYS[6], ARGV[at], ARGV[at + 1], ARGV[at + 2]) == 1 then
    enqueued = enqueued + 1
  else
    filtered = filtered + 1
  end
  at = at + 3
end

-- RPUSH takes many values at once; unpack in chunks to stay within Lua's
-- stack limit.
local first = at
while at < first + n_items do
  local last = math.min(at + 999, first + n_items - 1)
  redis.call('RPUSH', KEYS[7], unpack(ARGV, at, last))
  at = last + 1
end

for _ = 1, n_stats do
  redis.call('HINCRBY', KEYS[8], ARGV[at], ARGV[at + 1])
  at = at + 2
end
if enqueued > 0 then
  redis.call('HINCRBY', KEYS[8], 'scheduler/enqueued/redis', enqueued)
  local max_depth = tonumber(redis.call('HGET', KEYS[8], 'request_depth_max') or '0')
  if depth > max_depth then
    redis.call('HSET', KEYS[8], 'request_depth_max', depth)
  end
  redis.call('PUBLISH', channel, enqueued)
end
if filtered > 0 then
  redis.call('HINCRBY', KEYS[8], 'dupefilter/filtered', filtered)
end
local out = {enqueued, filtered}
local lease_next = tonumber(ARGV[10])
if lease_next > 0 then
  local now = now_ms()
  requeue_expired(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[8], now)
  lease_requests(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[9], KEYS[8], ARGV[1], tonumber(ARGV[11]), lease_next, now, out)
end
return out
