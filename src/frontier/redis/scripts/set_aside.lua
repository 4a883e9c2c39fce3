-- Set aside entries a worker cannot read (not UTF-8 text, written by
-- another tool): each leaves its key and becomes a dead letter in the same
-- step, counted (a start entry also as claimed, as claim_start counts
-- it). An entry already gone (claimed or set aside by another
-- worker, or a lease no longer this worker's) is skipped, so it is set
-- aside once. Called only when such an entry shows up: the lease script's
-- normal case pays nothing for it.
--
-- KEYS: 1 the key the entries are in (the start key, or the in-flight
--       set), 2 dead letters, 3 stats, and for leases: 4 request data,
--       5 lease owners
-- ARGV: 1 where they are: 'list', 'set' or 'zset' (start entries) or
--       'lease' (leased request ids), 2 worker (for leases), then per
--       entry two values: the entry as stored (bytes), its dead-letter JSON.
-- Returns one flag per entry: 1 set aside, 0 skipped.
local kind, worker = ARGV[1], ARGV[2]
local out = {}
local dead = 0
for i = 3, #ARGV, 2 do
  local entry = ARGV[i]
  local removed = 0
  if kind == 'list' then
    removed = redis.call('LREM', KEYS[1], 1, entry)
  elseif kind == 'set' then
    removed = redis.call('SREM', KEYS[1], entry)
  elseif kind == 'zset' then
    removed = redis.call('ZREM', KEYS[1], entry)
  elseif owned_by(redis.call('HGET', KEYS[5], entry), worker) then
    redis.call('ZREM', KEYS[1], entry)
    redis.call('HDEL', KEYS[5], entry)
    redis.call('HDEL', KEYS[4], entry)
    removed = 1
  end
  if removed > 0 then
    redis.call('RPUSH', KEYS[2], ARGV[i + 1])
    dead = dead + 1
  end
  out[#out + 1] = removed
end
if dead > 0 then
  redis.call('HINCRBY', KEYS[3], STAT.DEADLETTER_COUNT, dead)
  -- A start entry set aside was claimed, as claim_start counts it.
  if kind ~= 'lease' then
    redis.call('HINCRBY', KEYS[3], STAT.START_URLS_CLAIMED, dead)
  end
end
return out
