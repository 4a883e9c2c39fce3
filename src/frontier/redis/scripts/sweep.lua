-- Deletes per-host entries that can no longer matter, a bounded number per
-- call, so the per-host keys hold the hosts of recent activity rather than
-- every host the crawl has seen. Every worker calls it about once a second
-- (see Frontier::sweep); the HSCAN cursors kept in the sweep hash let a
-- call go on where the last one, of any worker, stopped.
--
-- Each deletion leaves the crawl as it was with the entry, or as a worker
-- already expects it:
-- * a politeness slot in the past: reserve_slot takes it for no slot at
--   all. For a host with back-off state, the slot (set to now by each of
--   its responses, see host_news) tells when it was last active: the slot
--   and that state go once it has been left alone for A.backoff_idle_ms;
-- * back-off state of a host with no slot (older crawlworkers wrote it
--   without one): it gets a slot at now, so its idle time starts;
-- * a robots.txt record past its expiry, with the host's Crawl-delay: the
--   workers re-read or fetch robots.txt then anyway, and a worker still
--   holding the policy passes its Crawl-delay to pace.lua. A record with no
--   expiry (older crawlworkers) gets one, its fetch time plus
--   A.robots_ttl_ms;
--   an unreadable one (which no worker uses) goes;
-- * robots.txt fetch locks that have run out (robots_lock.lua ignores them);
-- * heartbeats older than A.workers_keep_ms (workers long gone, holding
--   nothing);
-- * hand-off relations nobody renewed for as long (see
--   src/frontier/pipeline.rs: readers ignore them already).
--
-- Keys and arguments: `sweep` in protocol.rs.
-- Returns the entries deleted: {slots, back-off states, robots.txt
-- records, locks, workers, relations}, then the size of the crew (the
-- workers that leased or committed within a lease: see fair_room).
local pace, host_delay, backoff, errors = K.pace, K.host_delay, K.backoff, K.backoff_errors
local cursors, robots, expiry, locks, workers = K.sweep, K.robots, K.robots_expiry, K.robots_locks, K.workers
local n = math.max(1, tonumber(A.budget))
local idle_ms, robots_ttl_ms, workers_keep_ms = tonumber(A.backoff_idle_ms), tonumber(A.robots_ttl_ms),
  tonumber(A.workers_keep_ms)
local now = now_ms()
local slots, states, records, unlocked, gone = 0, 0, 0, 0, 0

-- One HSCAN step of `key` from the cursor saved under `field`, `visit`ing
-- each entry; a finished pass starts again next time.
local function scan(field, key, count, visit)
  local cursor = redis.call('HGET', cursors, field) or '0'
  local step = redis.call('HSCAN', key, cursor, 'COUNT', count)
  local entries = step[2]
  for i = 1, #entries, 2 do
    visit(entries[i], entries[i + 1])
  end
  if step[1] == '0' then
    redis.call('HDEL', cursors, field)
  else
    redis.call('HSET', cursors, field, step[1])
  end
end

scan('pace', pace, n, function(host, at)
  at = tonumber(at) or 0
  if at > now then
    return
  end
  if redis.call('HEXISTS', backoff, host) + redis.call('HEXISTS', errors, host) == 0 then
    redis.call('HDEL', pace, host)
    slots = slots + 1
  elseif at + idle_ms < now then
    redis.call('HDEL', pace, host)
    redis.call('HDEL', backoff, host)
    redis.call('HDEL', errors, host)
    slots, states = slots + 1, states + 1
  end
end)

local function start_idle(host)
  if redis.call('HEXISTS', pace, host) == 0 then
    redis.call('HSET', pace, host, now)
  end
end
scan('backoff', backoff, n, start_idle)
scan('errors', errors, n, start_idle)

for _, host in ipairs(redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, n)) do
  redis.call('HDEL', robots, host)
  redis.call('HDEL', host_delay, host)
  redis.call('ZREM', expiry, host)
  records = records + 1
end
-- Records come with bodies: a few at a time.
scan('robots', robots, math.min(n, 8), function(host, json)
  if redis.call('ZSCORE', expiry, host) then
    return
  end
  local fetched = json_number(json, 'fetched_at')
  if fetched then
    redis.call('ZADD', expiry, int(math.floor(fetched * 1000) + robots_ttl_ms), host)
  else
    redis.call('HDEL', robots, host)
    redis.call('HDEL', host_delay, host)
    records = records + 1
  end
end)

local free = redis.call('ZRANGEBYSCORE', locks, '-inf', now, 'LIMIT', 0, n)
call_many('ZREM', locks, free)
unlocked = #free

scan('workers', workers, n, function(id, json)
  local beat = json_number(json, 'heartbeat')
  if beat and now - beat * 1000 > workers_keep_ms then
    redis.call('HDEL', workers, id)
    gone = gone + 1
  end
end)

local forgotten = 0
scan('upstreams', K.upstreams, n, function(name, json)
  local seen = json_number(json, 'seen')
  if not seen or now - seen * 1000 > workers_keep_ms then
    redis.call('HDEL', K.upstreams, name)
    forgotten = forgotten + 1
  end
end)

return {slots, states, records, unlocked, gone, forgotten,
  prove_by('zset', 'crew', 'ZCOUNT', K.crew, '(' .. int(now), '+inf')}
