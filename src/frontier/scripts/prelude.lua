-- Shared by the frontier scripts (prepended to each one, after the STAT
-- table of stat names that `src/stats.rs` generates).
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

-- Enqueues one request unless the dupefilter `d` (see dupefilter.lua) has
-- seen its fingerprint (an empty fingerprint, or no `d`, means no filter).
-- Returns 1 if enqueued, 0 if filtered.
local function enqueue(requests, data, d, seq_key, fingerprint, priority, json, now)
  if fingerprint ~= '' and d and not dupe_add(d, fingerprint, now) then
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
    redis.call('HINCRBY', stats, STAT.LEASE_EXPIRED, #expired)
  end
end

-- The politeness key of a stored request: its URL's authority without user
-- info, lower-cased. Request::host_key in Rust computes the same.
local function host_of(json)
  local url = string.match(json, '"url":"([^"]*)"')
  if not url then
    return nil
  end
  local rest = string.match(url, '^[%a][%w+.-]*://(.*)$') or url
  local authority = string.match(rest, '^([^/?#]*)') or ''
  authority = string.match(authority, '@([^@]*)$') or authority
  return string.lower(authority)
end

-- Reserves the next politeness slot of `host` for the whole cluster and
-- returns how many ms to wait for it, and the interval applied. The interval is the largest of the
-- spider's (`base_ms`, randomised 0.5x-1.5x when `jitter` is set), the
-- host's Crawl-delay and its adaptive back-off. With no interval at all
-- nothing is written.
local function reserve_slot(pace, host_delay, backoff, host, base_ms, jitter, now, salt)
  local interval = base_ms
  if jitter and base_ms > 0 then
    -- Redis scripts have no useful random source; the clock's microseconds
    -- spread the factor well enough.
    local t = redis.call('TIME')
    local r = ((tonumber(t[2]) * 7919 + salt * 104729) % 1000) / 1000
    interval = math.floor(base_ms * (0.5 + r))
  end
  interval = math.max(interval, tonumber(redis.call('HGET', host_delay, host) or '0'),
    tonumber(redis.call('HGET', backoff, host) or '0'))
  local next_free = tonumber(redis.call('HGET', pace, host) or '0')
  if interval <= 0 and next_free <= now then
    return 0, 0
  end
  local slot = math.max(now, next_free)
  redis.call('HSET', pace, host, slot + interval)
  return slot - now, interval
end

-- Moves retries that are due from the delayed set back to the queue, at
-- the place their commit chose.
local function requeue_due(delayed, delayed_scores, requests, data, now)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 512)
  for _, id in ipairs(due) do
    local score = tonumber(redis.call('HGET', delayed_scores, id) or '0')
    redis.call('ZREM', delayed, id)
    redis.call('HDEL', delayed_scores, id)
    if redis.call('HEXISTS', data, id) == 1 then
      redis.call('ZADD', requests, score, id)
    end
  end
end

-- Moves scheduled revisits that are due into the queue, each as a new
-- request (its JSON as the commit scheduled it; no dupefilter), and marks
-- them queued-but-not-fetched until their commit (the overdue set).
local function release_revisits(K, now)
  local due = redis.call('ZRANGEBYSCORE', K.schedule, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 512)
  local queued = 0
  for i = 1, #due, 2 do
    local fp, at = due[i], due[i + 1]
    local json = redis.call('HGET', K.schedule_data, fp)
    redis.call('ZREM', K.schedule, fp)
    if json then
      local priority = tonumber(string.match(json, '"priority":(-?%d+)') or '0')
      local seq = redis.call('INCR', K.seq)
      redis.call('ZADD', K.requests, queue_score(priority, seq), seq)
      redis.call('HSET', K.data, seq, json)
      redis.call('ZADD', K.schedule_due, at, fp)
      queued = queued + 1
    end
  end
  if queued > 0 then
    redis.call('HINCRBY', K.stats, STAT.REVISIT_QUEUED, queued)
  end
end

-- Leases up to `max` requests to `worker` until now + lease_ms, appending
-- id, JSON, politeness wait (ms), interval applied (ms) to `out`. K is the
-- shared key table (see KEYS in lease.lua).
--
-- Requests are taken in queue order, but one whose host's next slot is
-- more than `max_wait` ms away is left queued for later: a worker never
-- fills its leases with requests for one slow (or backed-off) host while
-- other hosts' requests wait behind them. The scan looks at most 4 x `max`
-- queue entries deep. A queue member with no request behind it (written by
-- something other than crawlworker) is set aside rather than left to block
-- the queue.
--
-- Nothing is leased while the spider is paused (`crawlworker pause`), nor
-- beyond `max_pages` responses for the whole cluster (responses received
-- plus requests in flight); a request whose host has had
-- `max_per_host` pages leased is dropped and counted.
local function lease_requests(K, worker, lease_ms, max, now, pace_ms, jitter, max_wait, max_pages, max_per_host, out)
  requeue_expired(K.requests, K.data, K.inflight, K.owners, K.stats, now)
  requeue_due(K.delayed, K.delayed_scores, K.requests, K.data, now)
  release_revisits(K, now)
  if max <= 0 or redis.call('HEXISTS', K.control, 'paused') == 1 then
    return
  end
  if max_pages > 0 then
    local used = tonumber(redis.call('HGET', K.stats, STAT.RESPONSE_RECEIVED_COUNT) or '0')
      + redis.call('ZCARD', K.inflight)
    if used >= max_pages then
      if redis.call('HSETNX', K.control, 'max_pages_reached', now) == 1 then
        redis.call('HINCRBY', K.stats, STAT.QUOTA_MAX_PAGES_REACHED, 1)
      end
      return
    end
    -- A limit raised since it was reached.
    redis.call('HDEL', K.control, 'max_pages_reached')
    max = math.min(max, max_pages - used)
  end
  local candidates = redis.call('ZRANGE', K.requests, 0, max * 4 - 1, 'WITHSCORES')
  local leased, set_aside, host_dropped = 0, 0, 0
  for i = 1, #candidates, 2 do
    if leased >= max then
      break
    end
    local id, score = candidates[i], candidates[i + 1]
    local json = redis.call('HGET', K.data, id)
    if not json then
      redis.call('ZREM', K.requests, id)
      redis.call('RPUSH', K.dead, cjson.encode({
        key = K.requests, entry = string.sub(id, 1, 1024), bytes = #id,
        reason = 'queue member has no request data (not written by crawlworker?)',
        time = now / 1000,
      }))
      set_aside = set_aside + 1
    else
      local host = host_of(json)
      local next_free = host and tonumber(redis.call('HGET', K.pace, host) or '0') or 0
      if host and max_per_host > 0
          and tonumber(redis.call('HGET', K.host_pages, host) or '0') >= max_per_host then
        redis.call('ZREM', K.requests, id)
        redis.call('HDEL', K.data, id)
        host_dropped = host_dropped + 1
      elseif next_free - now <= max_wait then
        if host and max_per_host > 0 then
          redis.call('HINCRBY', K.host_pages, host, 1)
        end
        redis.call('ZREM', K.requests, id)
        redis.call('ZADD', K.inflight, now + lease_ms, id)
        redis.call('HSET', K.owners, id, worker .. '|' .. score)
        local wait, interval = 0, 0
        if host then
          wait, interval = reserve_slot(K.pace, K.host_delay, K.backoff, host, pace_ms, jitter, now, i)
        end
        out[#out + 1] = id
        out[#out + 1] = json
        out[#out + 1] = wait
        out[#out + 1] = interval
        leased = leased + 1
      end
    end
  end
  if leased > 0 then
    redis.call('HINCRBY', K.stats, STAT.SCHEDULER_DEQUEUED, leased)
  end
  if set_aside > 0 then
    redis.call('HINCRBY', K.stats, STAT.DEADLETTER_COUNT, set_aside)
  end
  if host_dropped > 0 then
    redis.call('HINCRBY', K.stats, STAT.QUOTA_HOST_DROPPED, host_dropped)
  end
end

-- The keys every leasing script receives first, in this order.
local function shared_keys()
  return {
    requests = KEYS[1], data = KEYS[2], inflight = KEYS[3], owners = KEYS[4],
    dead = KEYS[5], stats = KEYS[6], delayed = KEYS[7], delayed_scores = KEYS[8],
    pace = KEYS[9], host_delay = KEYS[10], backoff = KEYS[11], seq = KEYS[12],
    schedule = KEYS[13], schedule_data = KEYS[14], schedule_due = KEYS[15],
    control = KEYS[16], host_pages = KEYS[17],
  }
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

