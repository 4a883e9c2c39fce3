-- The queue: sequence numbers, enqueueing through the dupefilter, lease
-- owners, and work coming due back in the queue (expired leases, retries,
-- revisits).

-- Queue sequence numbers from the counter `key`, taken `n` at a time: one
-- INCRBY serves a whole batch of requests (numbers left unused are gaps,
-- which keep the order). Returns a function giving the next number. With
-- `first`, the first block is taken now, as the script's first write,
-- which proves the key (see prove_by).
local function seq_block(key, n, first)
  local next_seq, last = 1, 0
  n = math.max(1, n)
  if first then
    last = prove_by('string', 'sequence', 'INCRBY', key, int(n))
    next_seq = last - n + 1
  end
  return function()
    if next_seq > last then
      last = redis.call('INCRBY', key, int(n))
      next_seq = last - n + 1
    end
    next_seq = next_seq + 1
    return next_seq - 1
  end
end

-- Enqueues one request unless the dupefilter `d` (see dupefilter.lua) has
-- seen its fingerprint (an empty fingerprint, or no `d`, means no filter),
-- numbered by `next_seq` (see seq_block). Returns 1 if enqueued, 0 if
-- filtered.
local function enqueue(requests, data, d, next_seq, fingerprint, priority, json, now)
  if fingerprint ~= '' and d and not dupe_add(d, fingerprint, now) then
    return 0
  end
  local seq = next_seq()
  redis.call('ZADD', requests, queue_score(priority, seq), seq)
  redis.call('HSET', data, seq, json)
  return 1
end

-- A page's links are LINK records in ARGV; the helpers below read them
-- through `link`, a table of the record's size and field offsets that the
-- calling script builds (`{size = LINK.SIZE, fingerprint =
-- LINK.fingerprint, ...}`: record names are resolved in script bodies, not
-- in these helpers).

-- Appends to `fps` the fingerprints of the `n` LINK records from
-- ARGV[at] on (or from `src`[at] on, a list of the same shape);
-- dont_filter links, with none, are left out.
local function link_fingerprints(at, n, link, fps, src)
  src = src or ARGV
  for r = at, at + link.size * (n - 1), link.size do
    local fp = src[r + link.fingerprint]
    if fp ~= '' then
      fps[#fps + 1] = fp
    end
  end
  return fps
end

-- The dupefilter `d` (see dupe_config) for one call's links. With the
-- exact dupefilter (a set) and the call's fingerprints `fps` known up
-- front, one SMISMEMBER per 1,000 tells which were seen (a read before the
-- first write, so it proves the key) and one SADD records the new ones
-- (gate.record, after the last first_seen); otherwise, or without `fps`,
-- each goes through dupe_add in turn.
local function link_gate(d, fps, now)
  local known, new_fps = nil, new_list()
  if fps and d.mode == 'exact' then
    known = {}
    for first = 1, #fps, 1000 do
      local last = math.min(first + 999, #fps)
      local seen = prove_by('set', 'dupefilter', 'SMISMEMBER', d.key, unpack(fps, first, last))
      for i = first, last do
        if seen[i - first + 1] == 1 then
          known[fps[i]] = true
        end
      end
    end
  end
  local gate = {}
  -- Whether a request with fingerprint `fp` is new (and now remembered);
  -- one with none (dont_filter) always is.
  function gate.first_seen(fp)
    if fp == '' then
      return true
    elseif known then
      if known[fp] then
        return false
      end
      known[fp] = true
      new_fps[#new_fps + 1] = fp
      return true
    end
    return dupe_add(d, fp, now)
  end
  function gate.record()
    call_many('SADD', d.key, new_fps)
  end
  return gate
end

-- Queues the `n` LINK records from ARGV[at] on (or from `src`[at] on, a
-- list of the same shape) that `gate` finds new, each numbered by
-- `next_seq` (see seq_block): appends their scores and ids to
-- `queue_args` and their ids and JSON to `data_args`, for the caller's
-- ZADD and HSET. Returns how many were queued and filtered.
local function queue_links(at, n, link, gate, next_seq, queue_args, data_args, src)
  src = src or ARGV
  local enqueued = 0
  for r = at, at + link.size * (n - 1), link.size do
    if gate.first_seen(src[r + link.fingerprint]) then
      local number = next_seq()
      local seq = int(number)
      queue_args[#queue_args + 1] = int(queue_score(src[r + link.priority], number))
      queue_args[#queue_args + 1] = seq
      data_args[#data_args + 1] = seq
      data_args[#data_args + 1] = src[r + link.json]
      enqueued = enqueued + 1
    end
  end
  return enqueued, n - enqueued
end

-- The lease owner field is "<worker>|<queue score>": who holds the lease,
-- and where the request goes back to if the lease is handed back.
local function owned_by(owner, worker)
  return owner and string.sub(owner, 1, #worker + 1) == worker .. '|'
end

local function owner_score(owner)
  return tonumber(string.match(owner, '|([^|]*)$'))
end

-- Returns expired leases (of any worker) to the queue at their old place,
-- counting each request's expiries. A request whose lease has now expired
-- `max_expiries` times (0: no limit) is a dead letter instead, with its
-- reason: each worker that took it died or vanished holding it, and the
-- next would too (a page that crashes workers), so the crawl goes on
-- without it. The redrive limit of SQS and Sidekiq.
--
-- The count leads the request's JSON (`{"lease_expiries":2,…`), where
-- nothing else can put it, so it goes wherever the request goes (a
-- hand-back, a shard's outbox) and is gone with it once committed (a
-- retry or a revisit is written anew, without it). (Its helpers are this
-- function's: a script's main function has room for 200 locals.)
local function requeue_expired(K, now, max_expiries)
  -- The count in `json`, and `json` without it.
  local function expiries_in(json)
    local n, rest = string.match(json, '^{"lease_expiries":(%d+),?(.*)$')
    if n then
      return tonumber(n), '{' .. rest
    end
    return 0, json
  end
  -- `json` (without a count) carrying the count `n`.
  local function with_expiries(json, n)
    local sep = string.sub(json, 2, 2) == '}' and '' or ','
    return '{"lease_expiries":' .. int(n) .. sep .. string.sub(json, 2)
  end
  local expired = prove_by('zset', 'inflight', 'ZRANGEBYSCORE', K.inflight, '-inf', now, 'LIMIT', 0, 512)
  if #expired > 0 then
    before_write()
  end
  local dead = 0
  for _, id in ipairs(expired) do
    local owner = redis.call('HGET', K.leases, id)
    redis.call('ZREM', K.inflight, id)
    redis.call('HDEL', K.leases, id)
    local score = owner and owner_score(owner)
    local json = score and redis.call('HGET', K.request_data, id)
    if json then
      local n, request = expiries_in(json)
      n = n + 1
      local letter = nil
      if max_expiries > 0 and n >= max_expiries then
        -- As for a queue member without data (see lease_requests), the
        -- dead list is not proved first: if another tool made it something
        -- else, the request goes back to the queue with its count.
        letter = redis.pcall('RPUSH', K.dead, cjson.encode({
          key = K.requests, entry = escaped(string.sub(request, 1, 1024)), bytes = #request,
          reason = 'its lease expired ' .. int(n) .. ' times (max_lease_expiries = ' .. int(max_expiries)
            .. '): each worker that took it died or vanished before committing it, as a page that'
            .. ' crashes workers makes them; set aside rather than leased again',
          time = now / 1000,
        }))
      end
      if type(letter) == 'number' then
        redis.call('HDEL', K.request_data, id)
        dead = dead + 1
      else
        redis.call('HSET', K.request_data, id, with_expiries(request, n))
        redis.call('ZADD', K.requests, score, id)
      end
    end
  end
  count(STAT.LEASE_EXPIRED, #expired)
  count(STAT.LEASE_EXPIRED_DEAD, dead)
  count(STAT.DEADLETTER_COUNT, dead)
end

-- Moves retries that are due from the delayed set back to the queue, at
-- the place their commit chose.
local function requeue_due(delayed, delayed_scores, requests, data, now)
  local due = prove_by('zset', 'delayed', 'ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 512)
  if #due > 0 then
    before_write()
  end
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
  local due = prove_by('zset', 'schedule', 'ZRANGEBYSCORE', K.schedule, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 512)
  if #due > 0 then
    before_write()
  end
  local next_seq = seq_block(K.sequence, #due / 2)
  local queued = 0
  for i = 1, #due, 2 do
    local fp, at = due[i], due[i + 1]
    local json = redis.call('HGET', K.schedule_data, fp)
    redis.call('ZREM', K.schedule, fp)
    if json then
      -- The request's own priority, which nothing clamped (MAX_PRIORITY
      -- keeps the score exact and the order of equal priorities FIFO).
      local priority = tonumber(string.match(json, '"priority":(-?%d+)') or '0')
      priority = math.max(-MAX_PRIORITY, math.min(MAX_PRIORITY, priority))
      local seq = next_seq()
      redis.call('ZADD', K.requests, queue_score(priority, seq), seq)
      redis.call('HSET', K.request_data, seq, json)
      redis.call('ZADD', K.schedule_due, at, fp)
      queued = queued + 1
    end
  end
  count(STAT.REVISIT_QUEUED, queued)
end

-- The ms until the first request left queued for its host's slot may be
-- leased (nil: none was left), for next_due; sink_full shortens it while
-- the item stream's backlog is full.
local slot_due = nil
