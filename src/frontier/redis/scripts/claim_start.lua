-- Claim start entries: each entry leaves the start key only in this step,
-- which also enqueues its request (or sets it aside as a dead letter). An
-- entry another worker claimed first is skipped.
--
-- KEYS: 1 start key, 2 requests, 3 request data, 4 dupefilter, 5 sequence,
--       6 dead letters, 7 stats, 8 dupefilter meta
-- ARGV: 1 start key type (list|set|zset), 2 wake channel, 3 dupefilter
--       spec, then per entry
--       five values: the entry as read, 'req' or 'dead', for a request its
--       fingerprint ('' for dont_filter) and for a dead letter a stat to
--       count besides it ('' for none), priority, request JSON or
--       dead-letter JSON.
-- Returns {claimed, enqueued, filtered, dead}.
local kind = ARGV[1]
local dupe = dupe_config(ARGV[3], KEYS[4], KEYS[8])
-- Every key it writes, before it writes any (see need).
need(KEYS[1], kind, 'start_urls')
need(KEYS[2], 'zset', 'requests')
need(KEYS[3], 'hash', 'request_data')
need(KEYS[5], 'string', 'sequence')
need(KEYS[6], 'list', 'dead')
need(KEYS[7], 'hash', 'stats')
need_dupe(dupe)
local now = now_ms()
local claimed, enqueued, filtered, dead = 0, 0, 0, 0
local next_seq = seq_block(KEYS[5], (#ARGV - 3) / 5)
for i = 4, #ARGV, 5 do
  local entry = ARGV[i]
  local removed
  if kind == 'list' then
    removed = redis.call('LREM', KEYS[1], 1, entry)
  elseif kind == 'set' then
    removed = redis.call('SREM', KEYS[1], entry)
  else
    removed = redis.call('ZREM', KEYS[1], entry)
  end
  if removed > 0 then
    claimed = claimed + 1
    if ARGV[i + 1] == 'dead' then
      redis.call('RPUSH', KEYS[6], ARGV[i + 4])
      dead = dead + 1
      if ARGV[i + 2] ~= '' then
        redis.call('HINCRBY', KEYS[7], ARGV[i + 2], 1)
      end
    elseif enqueue(KEYS[2], KEYS[3], dupe, next_seq, ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], now) == 1 then
      enqueued = enqueued + 1
    else
      filtered = filtered + 1
    end
  end
end
if enqueued > 0 then
  redis.call('HINCRBY', KEYS[7], STAT.SCHEDULER_ENQUEUED, enqueued)
  redis.call('PUBLISH', ARGV[2], enqueued)
end
if filtered > 0 then
  redis.call('HINCRBY', KEYS[7], STAT.DUPEFILTER_FILTERED, filtered)
end
if dead > 0 then
  redis.call('HINCRBY', KEYS[7], STAT.DEADLETTER_COUNT, dead)
end
if claimed > 0 then
  redis.call('HINCRBY', KEYS[7], STAT.START_URLS_CLAIMED, claimed)
end
return {claimed, enqueued, filtered, dead}
