-- Leasing: the lease owners' note, the pause, taking requests from the
-- queue with their politeness slots, when work is next due, the keys
-- leasing writes, and peeking at start entries.

-- The lease owners hash holds one note besides the leases. Its value is
-- longer than the 64 bytes up to which Redis packs a small hash as a
-- listpack (hash-max-listpack-value), so the hash is always a real hash
-- table: a listpack of a few hundred leases is scanned from end to end on
-- every look-up, and the owners hash is read or written three times per
-- page (measured: a quarter of Redis's CPU per page with 128-512 leases
-- in flight). It also keeps the key from vanishing between crawls.
local OWNERS_NOTE_FIELD = '~'
local OWNERS_NOTE = 'not a lease: crawlworker keeps this field so that Redis stores this hash as a hash table '
  .. '(lease look-ups stay O(1)); every other field is a leased request id -> "worker|queue score"'

-- Whether the spider is paused (`crawlworker pause`), read once per call
-- (a commit reads it before its first write, which proves the control
-- hash).
local paused_read = nil
local function paused(K)
  if paused_read == nil then
    paused_read = prove_by('hash', 'control', 'HEXISTS', K.control, 'paused') == 1
  end
  return paused_read
end

-- Leases up to `max` requests to `worker` until now + lease_ms, appending
-- id, JSON, politeness wait (ms), interval applied (ms) to `out`. K is the
-- shared key table (see KEYS in lease.lua). With `release` set, work that
-- has come due is put back in the queue first: expired leases, retries
-- whose delay has passed, scheduled revisits. (The lease script always
-- does; a commit only when its worker asks, a few times a second, since
-- one ZRANGEBYSCORE each per page would be most of a commit's cost.)
--
-- Requests are taken in queue order, but one whose host's next slot is
-- more than `max_wait` ms away is left queued for later: a worker never
-- fills its leases with requests for one slow (or backed-off) host while
-- other hosts' requests wait behind them. The scan looks at most 4 x `max`
-- queue entries deep. A queue member with no request behind it (written by
-- something other than crawlworker) is set aside rather than left to block
-- the queue.
--
-- Nothing is leased while the spider is paused (`crawlworker pause`) or
-- its item stream's backlog is full (sink_full), nor
-- beyond `max_pages` responses for the whole cluster (responses received,
-- counted ones included, plus requests in flight); a request whose host
-- has had `max_per_host` pages leased is dropped and counted.
--
-- Sets `slot_due` to the ms until the first request left queued for its
-- host's slot may be leased (nil: none was left), for next_due.
local function lease_requests(K, worker, lease_ms, max, now, pace_ms, jitter, max_wait, max_pages, max_per_host,
                              release, out)
  if release then
    requeue_expired(K.requests, K.request_data, K.inflight, K.leases, now)
    requeue_due(K.delayed, K.delayed_scores, K.requests, K.request_data, now)
    release_revisits(K, now)
  end
  if max <= 0 or paused(K) or sink_full(K, now, release) then
    return
  end
  if max_pages > 0 then
    local used = tonumber(redis.call('HGET', K.stats, STAT.RESPONSE_RECEIVED_COUNT) or '0')
      + (tally[STAT.RESPONSE_RECEIVED_COUNT] or 0) + redis.call('ZCARD', K.inflight)
    before_write()
    if used >= max_pages then
      if redis.call('HSETNX', K.control, 'max_pages_reached', now) == 1 then
        count(STAT.QUOTA_MAX_PAGES_REACHED, 1)
      end
      return
    end
    -- A limit raised since it was reached.
    redis.call('HDEL', K.control, 'max_pages_reached')
    max = math.min(max, max_pages - used)
  end
  local deadline = int(now + lease_ms)
  local owner_prefix = worker .. '|'
  local leased = 0
  local unqueue, forget, inflight, owners = {}, {}, {}, {}
  -- The queue is read from the head in windows of as many entries as
  -- leases are missing (scores formatted and parsed cost Redis more than
  -- anything else here), up to 4 x `max` entries deep. Nothing leaves
  -- the queue until the scan is over, so the windows do not shift.
  local from, depth = 0, max * 4
  while leased < max and from < depth do
    local want = math.min(max - leased, 500, depth - from)
    local window = redis.call('ZRANGE', K.requests, int(from), int(from + want - 1), 'WITHSCORES')
    if #window == 0 then
      break
    end
    before_write()
    from = from + #window / 2
    local ids = {}
    for j = 1, #window, 2 do
      ids[#ids + 1] = window[j]
    end
    local jsons = redis.call('HMGET', K.request_data, unpack(ids))
    for j = 1, #ids do
      local id, score, json = ids[j], window[2 * j], jsons[j]
      if not json then
        unqueue[#unqueue + 1] = id
        redis.call('RPUSH', K.dead, cjson.encode({
          key = K.requests, entry = escaped(string.sub(id, 1, 1024)), bytes = #id,
          reason = 'queue member has no request data (not written by crawlworker?)',
          time = now / 1000,
        }))
        count(STAT.DEADLETTER_COUNT, 1)
      else
        local host = host_of(json)
        if host and max_per_host > 0 and host_get(K.host_pages, host) >= max_per_host then
          unqueue[#unqueue + 1] = id
          forget[#forget + 1] = id
          count(STAT.QUOTA_HOST_DROPPED, 1)
        elseif host and host_get(K.pace, host) - now > max_wait then
          local due = host_get(K.pace, host) - now - max_wait
          slot_due = math.min(slot_due or due, due)
        else
          if host and max_per_host > 0 then
            host_set(K.host_pages, host, host_get(K.host_pages, host) + 1)
          end
          unqueue[#unqueue + 1] = id
          inflight[#inflight + 1] = deadline
          inflight[#inflight + 1] = id
          owners[#owners + 1] = id
          owners[#owners + 1] = owner_prefix .. score
          local wait, interval = 0, 0
          if host then
            wait, interval = reserve_slot(K.pace, K.host_delay, K.backoff, host, pace_ms, jitter, now, from + j)
          end
          out[#out + 1] = id
          out[#out + 1] = json
          out[#out + 1] = wait
          out[#out + 1] = interval
          leased = leased + 1
        end
      end
    end
  end
  call_many('ZREM', K.requests, unqueue)
  call_many('HDEL', K.request_data, forget)
  call_many('ZADD', K.inflight, inflight)
  if #owners > 0 then
    owners[#owners + 1] = OWNERS_NOTE_FIELD
    owners[#owners + 1] = OWNERS_NOTE
  end
  call_many('HSET', K.leases, owners)
  count(STAT.SCHEDULER_DEQUEUED, leased)
end

-- Milliseconds until work that announces itself to nobody may be there
-- to lease (-1: none known): the next scheduled revisit, retry or lease
-- expiry, or the slot a request left queued waits for. An idle worker
-- sleeps until then (or a wake-up) instead of polling.
local function next_due(K, now)
  local due = slot_due or -1
  for _, key in ipairs({K.schedule, K.delayed, K.inflight}) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first == 2 then
      local ms = math.max(0, tonumber(first[2]) - now)
      if due < 0 or ms < due then
        due = ms
      end
    end
  end
  return due
end

-- Proves the keys lease_requests (and next_due)
-- may write, or read after a write: the keys due work comes back from
-- only with `release`, the pages-per-host hash only with a `max_per_host`
-- cap.
local function need_lease_keys(K, max_per_host, release)
  need(K.requests, 'zset', 'requests')
  need(K.request_data, 'hash', 'request_data')
  need(K.inflight, 'zset', 'inflight')
  need(K.leases, 'hash', 'leases')
  need(K.dead, 'list', 'dead')
  need(K.stats, 'hash', 'stats')
  need(K.pace, 'hash', 'pace')
  need(K.host_delay, 'hash', 'host_delay')
  need(K.backoff, 'hash', 'backoff')
  need(K.control, 'hash', 'control')
  if release then
    need(K.delayed, 'zset', 'delayed')
    need(K.delayed_scores, 'hash', 'delayed_scores')
    need(K.sequence, 'string', 'sequence')
    need(K.schedule, 'zset', 'schedule')
    need(K.schedule_data, 'hash', 'schedule_data')
    need(K.schedule_due, 'zset', 'schedule_due')
  end
  if max_per_host > 0 then
    need(K.host_pages, 'hash', 'host_pages')
  end
end

-- Up to `n` start entries, without removing them (claim_start does).
local function peek_start(key, kind, n)
  if n <= 0 then
    return {}
  end
  local r
  if kind == 'list' then
    r = redis.pcall('LRANGE', key, 0, n - 1)
  elseif kind == 'set' then
    r = redis.pcall('SRANDMEMBER', key, n)
  else
    r = redis.pcall('ZRANGE', key, 0, n - 1, 'REV')
  end
  if r.err then
    -- Named when it is the key's type (a start key pushed by another tool).
    need(key, kind, 'start_urls')
    error(r)
  end
  return r
end
