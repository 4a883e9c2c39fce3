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
