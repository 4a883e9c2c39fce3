-- Shared by the frontier scripts (prepended to each one).
--
-- Queue order: higher priority first, FIFO among equal priorities. A sorted
-- set orders by score, so the score is -priority * 2^40 + sequence: the
-- priority (clamped to ±4095 by the worker) in the high part, the enqueue
-- sequence in the low part. Every score stays below 2^53, exact in a double.
local SEQ_SPAN = 1099511627776

local function queue_score(priority, seq)
  return -tonumber(priority) * SEQ_SPAN + (seq % SEQ_SPAN)
end

-- Milliseconds of the Redis server's clock, so lease deadlines do not
-- depend on the clocks of the workers' hosts.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Enqueues one request unless the dupefilter has seen its fingerprint (an
-- empty fingerprint means dont_filter). Returns 1 if enqueued, 0 if filtered.
local function enqueue(requests, data, dupefilter, seq_key, fingerprint, priority, json)
  if fingerprint ~= '' and redis.call('SADD', dupefilter, fingerprint) == 0 then
    return 0
  end
  local seq = redis.call('INCR', seq_key)
  redis.call('ZADD', requests, queue_score(priority, seq), seq)
  redis.call('HSET', data, seq, json)
  return 1
end

-- The lease owner field is "<worker>|<queue score>": who holds the lease,
-- and where the request goes back to if the lease is handed back.
local function owned_by(owner, worker)
  return owner and string.sub(owner, 1, #worker + 1) == worker .. '|'
end

local function owner_score(owner)
  return tonumber(string.match(owner, '|([^|]*)$'))
end

-- Returns expired leases (of any worker) to the queue at their old place.
local function requeue_expired(requests, data, inflight, owners, stats, now)
  local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, 512)
  for _, id in ipairs(expired) do
    local owner = redis.call('HGET', owners, id)
    redis.call('ZREM', inflight, id)
    redis.call('HDEL', owners, id)
    local score = owner and owner_score(owner)
    if score and redis.call('HEXISTS', data, id) == 1 then
      redis.call('ZADD', requests, score, id)
    end
  end
  if #expired > 0 then
    redis.call('HINCRBY', stats, 'lease/expired_count', #expired)
  end
end

-- Leases up to `max` requests to `worker` until now + lease_ms, appending
-- id, JSON pairs to `out`. A queue member with no request behind it
-- (written by something other than crawlworker) is set aside rather than
-- left to block the queue.
local function lease_requests(requests, data, inflight, owners, dead, stats, worker, lease_ms, max, now, out)
  if max <= 0 then
    return
  end
  local popped = redis.call('ZPOPMIN', requests, max)
  local leased, set_aside = 0, 0
  for i = 1, #popped, 2 do
    local id, score = popped[i], popped[i + 1]
    local json = redis.call('HGET', data, id)
    if json then
      redis.call('ZADD', inflight, now + lease_ms, id)
      redis.call('HSET', owners, id, worker .. '|' .. score)
      out[#out + 1] = id
      out[#out + 1] = json
      leased = leased + 1
    else
      redis.call('RPUSH', dead, cjson.encode({
        key = requests, entry = string.sub(id, 1, 1024), bytes = #id,
        reason = 'queue member has no request data (not written by crawlworker?)',
        time = now / 1000,
      }))
      set_aside = set_aside + 1
    end
  end
  if leased > 0 then
    redis.call('HINCRBY', stats, 'scheduler/dequeued/redis', leased)
  end
  if set_aside > 0 then
    redis.call('HINCRBY', stats, 'deadletter/count', set_aside)
  end
end

-- Up to `n` start entries, without removing them (claim_start does).
local function peek_start(key, kind, n)
  if n <= 0 then
    return {}
  end
  if kind == 'list' then
    return redis.call('LRANGE', key, 0, n - 1)
  elseif kind == 'set' then
    return redis.call('SRANDMEMBER', key, n)
  else
    return redis.call('ZRANGE', key, 0, n - 1, 'REV')
  end
end
