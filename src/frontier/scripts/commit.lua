-- Commit one page: release its lease and, in the same atomic step, enqueue
-- its new requests (deduplicated), push its items, record a failure or a
-- dead letter, schedule its retry, adjust its host's back-off, and count
-- its stats. Does nothing unless worker ARGV[1] still holds the lease on
-- request ARGV[2]: a page is committed once. Then lease up to ARGV[10]
-- requests to replace it, so a busy worker needs one round trip per page.
--
-- KEYS: 1-17 as in lease.lua (requests, data, in-flight, owners, dead,
--       stats, delayed, delayed scores, pace, host delays, back-off,
--       sequence, revisit schedule, its requests, revisits queued, crawl
--       control, pages per host), 18 dupefilter, 19 items, 20 failed,
--       21 dupefilter meta, then one start key per spider links are
--       handed to (`to_spider`)
-- ARGV: 1 worker, 2 request id, 3 wake channel, 4 #requests, 5 #items,
--       6 #stat pairs, 7 depth of the new requests, 8 dead-letter JSON or
--       '', 9 failed JSON or '', 10 requests to lease next, 11 lease ms,
--       12 politeness interval ms, 13 randomise it (1/0), 14 retry delay ms
--       (-1: no retry), 15 the retried request's JSON, 16 its priority,
--       17 host outcome ('slow' for 429/503, 'ok', or ''), 18 ms the server
--       asked to wait (Retry-After), 19 longest back-off ms, 20 longest
--       politeness wait worth leasing for (ms), 21 dupefilter spec,
--       22 #spiders handed to, 23 #tasks, 24 revisit ('at': schedule the
--       page again, 'drop': take it off the schedule, '' neither), 25 the
--       page's fingerprint, 26 ms until it is due, 27 the request JSON that
--       fetches it again, 28 max_pages, 29 max_pages_per_host, then per
--       spider handed to its
--       start key type and wake channel, #tasks quadruples (spider number,
--       fingerprint, priority, task JSON), #requests triples (fingerprint,
--       priority, JSON), #items JSON strings, #stat pairs (field, delta).
-- Returns {enqueued, filtered, id1, json1, wait1, interval1, ...} (the new
-- leases), or
-- {-1, 0} when the lease was lost.
local K = shared_keys()
local seq_key, items_key, failed_key = K.seq, KEYS[19], KEYS[20]
local dupe = dupe_config(ARGV[21], KEYS[18], KEYS[21])
local worker, id, channel = ARGV[1], ARGV[2], ARGV[3]
local n_requests, n_items, n_stats = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local depth = tonumber(ARGV[7])

if not owned_by(redis.call('HGET', K.owners, id), worker) then
  return {-1, 0}
end
local now = now_ms()
local old_json = redis.call('HGET', K.data, id)
redis.call('ZREM', K.inflight, id)
redis.call('HDEL', K.owners, id)

local retry_ms = tonumber(ARGV[14])
if retry_ms >= 0 then
  -- The same id waits in the delayed set, then returns to the queue.
  redis.call('HSET', K.data, id, ARGV[15])
  local seq = redis.call('INCR', seq_key)
  redis.call('HSET', K.delayed_scores, id, queue_score(ARGV[16], seq))
  redis.call('ZADD', K.delayed, now + retry_ms, id)
else
  redis.call('HDEL', K.data, id)
end

-- Counted where they are written, so the stats and the keys agree.
if ARGV[8] ~= '' then
  redis.call('RPUSH', K.dead, ARGV[8])
  redis.call('HINCRBY', K.stats, STAT.DEADLETTER_COUNT, 1)
end
if ARGV[9] ~= '' then
  redis.call('RPUSH', failed_key, ARGV[9])
  redis.call('HINCRBY', K.stats, STAT.FAILED_COUNT, 1)
end

-- Adaptive back-off, shared by the cluster: a 429/503 doubles the host's
-- delay (at least 1 s, at least Retry-After, at most ARGV[19]) and keeps
-- everyone away until Retry-After has passed; each good response takes a
-- fifth off again.
local host = old_json and host_of(old_json)
if host and ARGV[17] ~= '' then
  local old = tonumber(redis.call('HGET', K.backoff, host) or '0')
  if ARGV[17] == 'slow' then
    local wait = tonumber(ARGV[18])
    local new = math.min(math.max(old * 2, 1000, wait), tonumber(ARGV[19]))
    redis.call('HSET', K.backoff, host, new)
    local next_free = tonumber(redis.call('HGET', K.pace, host) or '0')
    if now + wait > next_free then
      redis.call('HSET', K.pace, host, now + wait)
    end
    redis.call('HINCRBY', K.stats, STAT.BACKOFF_SLOWED, 1)
  elseif old > 0 then
    local new = math.floor(old * 0.8)
    if new < 50 then
      redis.call('HDEL', K.backoff, host)
    else
      redis.call('HSET', K.backoff, host, new)
    end
  end
end

-- A page a revisit rule fetched is due again (whether it came from the
-- schedule or not), or leaves the schedule; either way its revisit is no
-- longer overdue.
local revisit, revisit_fp = ARGV[24], ARGV[25]
if revisit ~= '' then
  redis.call('ZREM', K.schedule_due, revisit_fp)
  if revisit == 'at' then
    redis.call('ZADD', K.schedule, now + tonumber(ARGV[26]), revisit_fp)
    redis.call('HSET', K.schedule_data, revisit_fp, ARGV[27])
  elseif redis.call('ZREM', K.schedule, revisit_fp) + redis.call('HDEL', K.schedule_data, revisit_fp) > 0 then
    redis.call('HINCRBY', K.stats, STAT.REVISIT_DROPPED, 1)
  end
end

local n_targets, n_tasks = tonumber(ARGV[22]), tonumber(ARGV[23])
local at = 30
local targets = {}
for i = 1, n_targets do
  targets[i] = {key = KEYS[21 + i], kind = ARGV[at], channel = ARGV[at + 1], pushed = 0}
  at = at + 2
end
local enqueued, filtered, handed = 0, 0, 0
-- A handed link passes this spider's dupefilter, then becomes a task on
-- the other spider's start key.
for _ = 1, n_tasks do
  local t = targets[tonumber(ARGV[at])]
  local fp = ARGV[at + 1]
  if fp ~= '' and dupe and not dupe_add(dupe, fp, now) then
    filtered = filtered + 1
  else
    if t.kind == 'list' then
      redis.call('RPUSH', t.key, ARGV[at + 3])
    elseif t.kind == 'set' then
      redis.call('SADD', t.key, ARGV[at + 3])
    else
      redis.call('ZADD', t.key, ARGV[at + 2], ARGV[at + 3])
    end
    t.pushed = t.pushed + 1
    handed = handed + 1
  end
  at = at + 4
end
for _, t in ipairs(targets) do
  if t.pushed > 0 then
    redis.call('PUBLISH', t.channel, t.pushed)
  end
end
if handed > 0 then
  redis.call('HINCRBY', K.stats, STAT.SCHEDULER_HANDED_OFF, handed)
end
for _ = 1, n_requests do
  if enqueue(K.requests, K.data, dupe, seq_key, ARGV[at], ARGV[at + 1], ARGV[at + 2], now) == 1 then
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
  redis.call('RPUSH', items_key, unpack(ARGV, at, last))
  at = last + 1
end

for _ = 1, n_stats do
  redis.call('HINCRBY', K.stats, ARGV[at], ARGV[at + 1])
  at = at + 2
end
if enqueued > 0 then
  redis.call('HINCRBY', K.stats, STAT.SCHEDULER_ENQUEUED, enqueued)
  local max_depth = tonumber(redis.call('HGET', K.stats, STAT.REQUEST_DEPTH_MAX) or '0')
  if depth > max_depth then
    redis.call('HSET', K.stats, STAT.REQUEST_DEPTH_MAX, depth)
  end
  redis.call('PUBLISH', channel, enqueued)
end
if filtered > 0 then
  redis.call('HINCRBY', K.stats, STAT.DUPEFILTER_FILTERED, filtered)
end
local out = {enqueued, filtered}
lease_requests(K, worker, tonumber(ARGV[11]), tonumber(ARGV[10]), now, tonumber(ARGV[12]), ARGV[13] == '1', tonumber(ARGV[20]),
  tonumber(ARGV[28]), tonumber(ARGV[29]), out)
return out
