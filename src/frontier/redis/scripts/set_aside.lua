-- Set aside entries a worker cannot read (not UTF-8 text, written by
-- another tool): each leaves its key and becomes a dead letter in the same
-- step, counted (a start entry also as claimed, as claim_start counts
-- it). An entry already gone (claimed or set aside by another
-- worker, or a lease no longer this worker's) is skipped, so it is set
-- aside once. Called only when such an entry shows up: the lease script's
-- normal case pays nothing for it.
--
-- Keys, arguments and ASIDE records: `set_aside` in protocol.rs. K.source
-- is the key the entries are in (the start key, or the in-flight set);
-- A.kind says which: 'list', 'set' or 'zset' (start entries) or 'lease'
-- (leased request ids, of worker A.worker).
-- Returns one flag per entry: 1 set aside, 0 skipped.
local kind, worker, source = A.kind, A.worker, K.source
local out = {}
local dead = 0
for i = REST, #ARGV, ASIDE.SIZE do
  local entry = ARGV[i + ASIDE.entry]
  local removed = 0
  if kind == 'list' then
    removed = redis.call('LREM', source, 1, entry)
  elseif kind == 'set' then
    removed = redis.call('SREM', source, entry)
  elseif kind == 'zset' then
    removed = redis.call('ZREM', source, entry)
  elseif owned_by(redis.call('HGET', K.leases, entry), worker) then
    redis.call('ZREM', source, entry)
    redis.call('HDEL', K.leases, entry)
    redis.call('HDEL', K.request_data, entry)
    removed = 1
  end
  if removed > 0 then
    redis.call('RPUSH', K.dead, ARGV[i + ASIDE.letter])
    dead = dead + 1
  end
  out[#out + 1] = removed
end
if dead > 0 then
  redis.call('HINCRBY', K.stats, STAT.DEADLETTER_COUNT, dead)
  -- A start entry set aside was claimed, as claim_start counts it.
  if kind ~= 'lease' then
    redis.call('HINCRBY', K.stats, STAT.START_URLS_CLAIMED, dead)
  end
end
return out
