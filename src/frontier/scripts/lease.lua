-- Lease up to ARGV[3] requests for worker ARGV[1] for ARGV[2] ms, after
-- first returning expired leases (of any worker) to the queue.
--
-- KEYS: 1 requests (zset of ids), 2 request data (hash id -> JSON),
--       3 in-flight (zset id -> deadline ms), 4 lease owners (hash),
--       5 dead letters (list), 6 stats (hash)
-- Returns {id1, json1, id2, json2, ...}.
local worker, lease_ms, max = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()

local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 512)
for _, id in ipairs(expired) do
  local owner = redis.call('HGET', KEYS[4], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('HDEL', KEYS[4], id)
  local score = owner and owner_score(owner)
  if score and redis.call('HEXISTS', KEYS[2], id) == 1 then
    redis.call('ZADD', KEYS[1], score, id)
  end
end
if #expired > 0 then
  redis.call('HINCRBY', KEYS[6], 'lease/expired_count', #expired)
end

local out = {}
if max <= 0 then
  return out
end
local popped = redis.call('ZPOPMIN', KEYS[1], max)
local leased, dead = 0, 0
for i = 1, #popped, 2 do
  local id, score = popped[i], popped[i + 1]
  local json = redis.call('HGET', KEYS[2], id)
  if json then
    redis.call('ZADD', KEYS[3], now + lease_ms, id)
    redis.call('HSET', KEYS[4], id, worker .. '|' .. score)
    out[#out + 1] = id
    out[#out + 1] = json
    leased = leased + 1
  else
    -- A queue member with no request behind it (written by something other
    -- than crawlworker): set it aside rather than block the queue.
    redis.call('RPUSH', KEYS[5], cjson.encode({
      key = KEYS[1], entry = string.sub(id, 1, 1024),
      reason = 'queue member has no request data (not written by crawlworker?)',
      time = now,
    }))
    dead = dead + 1
  end
end
if leased > 0 then
  redis.call('HINCRBY', KEYS[6], 'scheduler/dequeued/redis', leased)
end
if dead > 0 then
  redis.call('HINCRBY', KEYS[6], 'deadletter/count', dead)
end
return out
