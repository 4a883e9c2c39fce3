-- Shared by the frontier scripts (prepended to each one, after the STAT
-- table of stat names that `src/stats.rs` generates).
--
-- Queue order: higher priority first, FIFO among equal priorities. A sorted
-- set orders by score, so the score is -priority * 2^40 + sequence: the
-- priority (clamped to ±4095 by the worker) in the high part, the enqueue
-- sequence in the low part. Every score stays below 2^53, exact in a double.
local SEQ_SPAN = 1099511627776

-- A number from an argument: the small counts most arguments hold come
-- from a table, since tonumber (strtod) is a large share of what a page
-- costs a script.
local SMALL = {['0'] = 0, ['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4, ['5'] = 5, ['6'] = 6, ['7'] = 7, ['8'] = 8,
               ['9'] = 9}
local function num(s)
  return SMALL[s] or tonumber(s)
end

local function queue_score(priority, seq)
  return -num(priority) * SEQ_SPAN + (seq % SEQ_SPAN)
end

-- A whole number as Redis receives it: '%d' is much cheaper than the
-- '%.17g' a Lua number passed to redis.call is formatted with.
local function int(n)
  return string.format('%d', n)
end

-- Key types, proved before a script writes anything: Redis scripts do not
-- roll back, so a command failing on a key another tool made with the
-- wrong type would leave the script's earlier writes in place (half a
-- commit). Every key a script writes, or reads after its first write, is
-- proved first, once per script call (remembered in `key_types`): by a
-- read the script needs anyway (see prove_by), or else by one TYPE
-- (need). A missing key is always fine. A wrong one raises a WRONGTYPE
-- error naming the key, its kind in [keys], its type and the type
-- expected; nothing is written.
local key_types = {}

-- Checks now that `key` (its kind's name in [keys]: `kind`) is missing or
-- holds a `want` (as TYPE names it).
local function need(key, want, kind)
  local found = key_types[key]
  if found == nil then
    found = redis.call('TYPE', key).ok
    key_types[key] = found
  end
  if found ~= want and found ~= 'none' then
    error(redis.error_reply(string.format(
      'WRONGTYPE key %s ([keys] %s) is a %s, not a %s as crawlworker writes it; nothing was written', key, kind,
      found, want)))
  end
end

-- `command key …`, a read the script makes before its first write (or
-- the first write itself): its success proves `key` a `want` (or
-- missing), and a failure names the key (see need) with nothing written.
local function prove_by(want, kind, command, key, ...)
  local r = redis.pcall(command, key, ...)
  if type(r) == 'table' and r.err then
    need(key, want, kind)
    error(r)
  end
  if key_types[key] == nil then
    key_types[key] = want
  end
  return r
end

-- Proves the keys a write to the dupefilter `d` (see dupe_config)
-- touches. Bloom filters after the first and expiring buckets are keys of
-- crawlworker's own naming.
local DUPE_TYPES = {exact = 'set', compact = 'hash', bloom = 'string'}
local function need_dupe(d)
  if not d then
    return
  end
  local want = DUPE_TYPES[d.mode]
  if want then
    need(d.key, want, 'dupefilter')
  end
  if d.mode ~= 'exact' then
    need(d.meta, 'hash', 'dupefilter_meta')
  end
end

-- A function a script sets to prove its keys the first time it is about
-- to write (before_write): a call that writes nothing (an idle worker's
-- lease) proves nothing.
local write_checks = nil
local function before_write()
  if write_checks then
    local checks = write_checks
    write_checks = nil
    checks()
  end
end

-- Milliseconds of the Redis server's clock, so lease deadlines do not
-- depend on the clocks of the workers' hosts. The microseconds of the
-- reading are kept as a seed for jitter (Redis scripts have no useful
-- random source).
local clock_us = 0
local function now_ms()
  local t = redis.call('TIME')
  clock_us = tonumber(t[2])
  return tonumber(t[1]) * 1000 + math.floor(clock_us / 1000)
end

-- Runs `command key v1 v2 …` over the values of `list`, 1000 at a time
-- (Lua's unpack has a limit): one command for a whole batch. Pairs stay
-- whole (1000 is even).
local function call_many(command, key, list)
  local n = #list
  if n == 0 then
    return
  end
  for first = 1, n, 1000 do
    redis.call(command, key, unpack(list, first, math.min(first + 999, n)))
  end
end

-- Stat increments, summed over the script call and written at its end
-- (flush_tally) in one HSET: a batch of pages costs one read and one write
-- of the stats hash, not one HINCRBY per page and stat (nor per stat:
-- each command a script runs costs Redis more than the arithmetic here).
-- Fields keep the order they were first counted in.
local tally_fields, tally = {}, {}

local function count(field, n)
  n = tonumber(n)
  if not n or n == 0 then
    return
  end
  local old = tally[field]
  if old == nil then
    tally_fields[#tally_fields + 1] = field
    tally[field] = n
  else
    tally[field] = old + n
  end
end

-- Values of the stats hash read in this call, by field (read_stats).
local stat_values = {}

-- Reads `fields` of the stats hash `stats` in one HMGET (a script reads
-- the fields it knows of before its first write, which proves the hash; see
-- prove_by). A field that is missing, or holds what is not a number
-- (another tool's), counts from 0.
local function read_stats(stats, fields)
  if #fields == 0 then
    return
  end
  local values = prove_by('hash', 'stats', 'HMGET', stats, unpack(fields))
  for i, field in ipairs(fields) do
    stat_values[field] = tonumber(values[i]) or 0
  end
end

local function flush_tally(stats)
  local unread, sets = {}, {}
  for _, field in ipairs(tally_fields) do
    if tally[field] ~= 0 and stat_values[field] == nil then
      unread[#unread + 1] = field
    end
  end
  read_stats(stats, unread)
  for _, field in ipairs(tally_fields) do
    local n = tally[field]
    if n ~= 0 then
      local v = stat_values[field] + n
      stat_values[field] = v
      sets[#sets + 1] = field
      sets[#sets + 1] = int(v)
    end
  end
  if #sets > 0 then
    before_write()
  end
  call_many('HSET', stats, sets)
  tally_fields, tally = {}, {}
end

-- Per-host numbers (politeness slots, Crawl-delays, back-off, pages per
-- host), read once per script call and written at its end (flush_hosts,
-- one HSET and one HDEL per key): a batch of pages and leases for one host
-- reads and writes each of them once.
local host_cache, host_dirty, host_dirty_list = {}, {}, {}

-- With `kind` (the key's name in [keys]), a read made before the
-- script's first write, which proves the key (see prove_by).
local function host_get(key, host, kind)
  local by_host = host_cache[key]
  if not by_host then
    by_host = {}
    host_cache[key] = by_host
  end
  local v = by_host[host]
  if v == nil then
    local raw
    if kind then
      raw = prove_by('hash', kind, 'HGET', key, host)
    else
      raw = redis.call('HGET', key, host)
    end
    v = tonumber(raw or '0') or 0
    by_host[host] = v
  end
  return v
end

-- `v` false deletes the field.
local function host_set(key, host, v)
  host_get(key, host)
  local by_host = host_cache[key]
  local mark = key .. '\n' .. host
  if host_dirty[mark] == nil then
    host_dirty_list[#host_dirty_list + 1] = {key, host}
  end
  host_dirty[mark] = v ~= false
  by_host[host] = v or 0
end

local function host_del(key, host)
  host_set(key, host, false)
end

local function flush_hosts()
  if #host_dirty_list > 0 then
    before_write()
  end
  local keys, sets, dels = {}, {}, {}
  for _, kh in ipairs(host_dirty_list) do
    local key, host = kh[1], kh[2]
    if not sets[key] then
      keys[#keys + 1] = key
      sets[key], dels[key] = {}, {}
    end
    if host_dirty[key .. '\n' .. host] then
      local list = sets[key]
      list[#list + 1] = host
      list[#list + 1] = int(host_cache[key][host])
    else
      local list = dels[key]
      list[#list + 1] = host
    end
  end
  for _, key in ipairs(keys) do
    call_many('HSET', key, sets[key])
    call_many('HDEL', key, dels[key])
  end
  host_dirty, host_dirty_list = {}, {}
end

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

-- The lease owner field is "<worker>|<queue score>": who holds the lease,
-- and where the request goes back to if the lease is handed back.
local function owned_by(owner, worker)
  return owner and string.sub(owner, 1, #worker + 1) == worker .. '|'
end

local function owner_score(owner)
  return tonumber(string.match(owner, '|([^|]*)$'))
end

-- Returns expired leases (of any worker) to the queue at their old place.
local function requeue_expired(requests, data, inflight, owners, now)
  local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, 512)
  if #expired > 0 then
    before_write()
  end
  for _, id in ipairs(expired) do
    local owner = redis.call('HGET', owners, id)
    redis.call('ZREM', inflight, id)
    redis.call('HDEL', owners, id)
    local score = owner and owner_score(owner)
    if score and redis.call('HEXISTS', data, id) == 1 then
      redis.call('ZADD', requests, score, id)
    end
  end
  count(STAT.LEASE_EXPIRED, #expired)
end

-- The politeness key of a stored request: its URL's authority without user
-- info, lower-cased. Request::host_key in Rust computes the same.
-- crawlworker writes "url" first, so the common case is one anchored
-- match.
local function host_of(json)
  local authority = string.match(json, '^{"url":"[%a][%w+.-]*://([^/?#"]*)')
  if not authority then
    local url = string.match(json, '"url":"([^"]*)"')
    if not url then
      return nil
    end
    local rest = string.match(url, '^[%a][%w+.-]*://(.*)$') or url
    authority = string.match(rest, '^([^/?#]*)') or ''
  end
  if string.find(authority, '@', 1, true) then
    authority = string.match(authority, '@([^@]*)$')
  end
  if string.find(authority, '%u') then
    authority = string.lower(authority)
  end
  return authority
end

-- Reserves the next politeness slot of `host` for the whole cluster and
-- returns how many ms to wait for it, and the interval applied. The
-- interval is the largest of the spider's (`base_ms`, randomised
-- 0.5x-1.5x when `jitter` is set), the host's Crawl-delay, its adaptive
-- back-off and `floor_ms` (a Crawl-delay the caller knows, if any). With
-- no interval at all nothing is written.
local function reserve_slot(pace, host_delay, backoff, host, base_ms, jitter, now, salt, floor_ms)
  local interval = base_ms
  if jitter and base_ms > 0 then
    local r = ((clock_us * 7919 + salt * 104729) % 1000) / 1000
    interval = math.floor(base_ms * (0.5 + r))
  end
  interval = math.max(interval, host_get(host_delay, host), host_get(backoff, host), floor_ms or 0)
  local next_free = host_get(pace, host)
  if interval <= 0 and next_free <= now then
    return 0, 0
  end
  local slot = math.max(now, next_free)
  host_set(pace, host, slot + interval)
  return slot - now, interval
end

-- Moves retries that are due from the delayed set back to the queue, at
-- the place their commit chose.
local function requeue_due(delayed, delayed_scores, requests, data, now)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 512)
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
  local due = redis.call('ZRANGEBYSCORE', K.schedule, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 512)
  if #due > 0 then
    before_write()
  end
  local next_seq = seq_block(K.seq, #due / 2)
  local queued = 0
  for i = 1, #due, 2 do
    local fp, at = due[i], due[i + 1]
    local json = redis.call('HGET', K.schedule_data, fp)
    redis.call('ZREM', K.schedule, fp)
    if json then
      local priority = tonumber(string.match(json, '"priority":(-?%d+)') or '0')
      local seq = next_seq()
      redis.call('ZADD', K.requests, queue_score(priority, seq), seq)
      redis.call('HSET', K.data, seq, json)
      redis.call('ZADD', K.schedule_due, at, fp)
      queued = queued + 1
    end
  end
  count(STAT.REVISIT_QUEUED, queued)
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
local slot_due = nil

-- Item sinks. `arg` is the scripts' sink argument (SinkOptions::arg):
-- 'list', or 'stream:<max backlog>' (0: no bound).
local function item_sink(arg)
  local max = string.match(arg, '^stream:(%d+)$')
  return {stream = max ~= nil, max_backlog = tonumber(max or '0')}
end

-- An error reply, before anything is written, when the items key holds
-- another type than the sink writes: a command failing half-way through a
-- script would leave the script's earlier writes in place.
local function sink_type_error(key, sink)
  local found = redis.call('TYPE', key).ok
  local want = sink.stream and 'stream' or 'list'
  if found ~= 'none' and found ~= want then
    return redis.error_reply(string.format(
      'WRONGTYPE key %s ([keys] items) is a %s, not the %s [items] sink = "%s" writes; nothing was written', key, found,
      want, want))
  end
end

local function push_items(key, sink, items)
  if not sink.stream then
    call_many('RPUSH', key, items)
    return
  end
  for _, json in ipairs(items) do
    redis.call('XADD', key, '*', 'item', json)
  end
end

-- Stream ids 'ms-seq' in order.
local function id_before(a, b)
  local a_ms, a_seq = string.match(a, '^(%d+)-(%d+)$')
  local b_ms, b_seq = string.match(b, '^(%d+)-(%d+)$')
  a_ms, b_ms = tonumber(a_ms) or 0, tonumber(b_ms) or 0
  return a_ms < b_ms or (a_ms == b_ms and (tonumber(a_seq) or 0) < (tonumber(b_seq) or 0))
end

-- The items of stream `key` its slowest consumer group has not
-- acknowledged: per group, the entries not yet delivered (its lag; the
-- whole stream when Redis cannot tell) plus those delivered and pending;
-- without groups, the whole stream. With `trim`, entries every group has
-- acknowledged are trimmed (MINID ~: never more, sometimes fewer).
local function items_backlog(key, trim)
  if redis.call('TYPE', key).ok ~= 'stream' then
    return 0
  end
  local length = redis.call('XLEN', key)
  local groups = redis.call('XINFO', 'GROUPS', key)
  if #groups == 0 then
    return length
  end
  local backlog, keep = 0, nil
  for _, g in ipairs(groups) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    local lag = tonumber(f['lag']) or length
    local pending = tonumber(f['pending']) or 0
    backlog = math.max(backlog, lag + pending)
    local first = f['last-delivered-id']
    if pending > 0 then
      first = redis.call('XPENDING', key, f['name'])[2]
    end
    if keep == nil or id_before(first, keep) then
      keep = first
    end
  end
  if trim and keep then
    before_write()
    redis.call('XTRIM', key, 'MINID', '~', keep)
  end
  return backlog
end

-- Back-pressure of a stream sink: true while its backlog is at the bound,
-- and then nothing is leased. The control hash says since when
-- (`items_backlog_full`, for `stats` and the workers' logs); idle workers
-- look again within BACKLOG_RECHECK_MS, since consumers acknowledging
-- items announce nothing.
local BACKLOG_RECHECK_MS = 1000
local function sink_full(K, now, trim)
  local sink = K.sink
  if not sink or not sink.stream or sink.max_backlog <= 0 then
    return false
  end
  local backlog = items_backlog(K.items, trim)
  before_write()
  if backlog < sink.max_backlog then
    redis.call('HDEL', K.control, 'items_backlog_full')
    return false
  end
  if redis.call('HSETNX', K.control, 'items_backlog_full', int(now)) == 1 then
    count(STAT.ITEMS_BACKLOG_FULL, 1)
  end
  slot_due = math.min(slot_due or BACKLOG_RECHECK_MS, BACKLOG_RECHECK_MS)
  return true
end

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

-- `s` with every byte that is not part of UTF-8 text shown as \xNN, as
-- wording::escaped shows it, so that a record holding foreign bytes (a
-- queue member another tool wrote) stays JSON every reader can read. It
-- walks every byte: for rare paths only.
local function escaped(s)
  if not string.find(s, '[\128-\255]') then
    return s
  end
  local out, i, n = {}, 1, #s
  while i <= n do
    local c = string.byte(s, i)
    local len = 0
    if c < 0x80 then
      len = 1
    elseif c >= 0xC2 and c <= 0xDF then
      len = 2
    elseif c >= 0xE0 and c <= 0xEF then
      len = 3
    elseif c >= 0xF0 and c <= 0xF4 then
      len = 4
    end
    local ok = len > 0 and i + len - 1 <= n
    if ok and len > 1 then
      for j = i + 1, i + len - 1 do
        local b = string.byte(s, j)
        if b < 0x80 or b > 0xBF then
          ok = false
          break
        end
      end
      -- No overlong forms, surrogates or code points past U+10FFFF.
      local b2 = string.byte(s, i + 1)
      if ok and ((c == 0xE0 and b2 < 0xA0) or (c == 0xED and b2 > 0x9F) or (c == 0xF0 and b2 < 0x90)
          or (c == 0xF4 and b2 > 0x8F)) then
        ok = false
      end
    end
    if ok then
      out[#out + 1] = string.sub(s, i, i + len - 1)
      i = i + len
    else
      out[#out + 1] = string.format('\\x%02x', c)
      i = i + 1
    end
  end
  return table.concat(out)
end

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

local function lease_requests(K, worker, lease_ms, max, now, pace_ms, jitter, max_wait, max_pages, max_per_host,
                              release, out)
  if release then
    requeue_expired(K.requests, K.data, K.inflight, K.owners, now)
    requeue_due(K.delayed, K.delayed_scores, K.requests, K.data, now)
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
    local jsons = redis.call('HMGET', K.data, unpack(ids))
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
  call_many('HDEL', K.data, forget)
  call_many('ZADD', K.inflight, inflight)
  if #owners > 0 then
    owners[#owners + 1] = OWNERS_NOTE_FIELD
    owners[#owners + 1] = OWNERS_NOTE
  end
  call_many('HSET', K.owners, owners)
  count(STAT.SCHEDULER_DEQUEUED, leased)
end

-- The keys every leasing script receives first, in this order.
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

local function shared_keys()
  return {
    requests = KEYS[1], data = KEYS[2], inflight = KEYS[3], owners = KEYS[4],
    dead = KEYS[5], stats = KEYS[6], delayed = KEYS[7], delayed_scores = KEYS[8],
    pace = KEYS[9], host_delay = KEYS[10], backoff = KEYS[11], seq = KEYS[12],
    schedule = KEYS[13], schedule_data = KEYS[14], schedule_due = KEYS[15],
    control = KEYS[16], host_pages = KEYS[17],
  }
end

-- Proves the shared keys (see shared_keys) lease_requests (and next_due)
-- may write, or read after a write: the keys due work comes back from
-- only with `release`, the pages-per-host hash only with a `max_per_host`
-- cap.
local function need_lease_keys(K, max_per_host, release)
  need(K.requests, 'zset', 'requests')
  need(K.data, 'hash', 'request_data')
  need(K.inflight, 'zset', 'inflight')
  need(K.owners, 'hash', 'leases')
  need(K.dead, 'list', 'dead')
  need(K.stats, 'hash', 'stats')
  need(K.pace, 'hash', 'pace')
  need(K.host_delay, 'hash', 'host_delay')
  need(K.backoff, 'hash', 'backoff')
  need(K.control, 'hash', 'control')
  if release then
    need(K.delayed, 'zset', 'delayed')
    need(K.delayed_scores, 'hash', 'delayed_scores')
    need(K.seq, 'string', 'sequence')
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


-- What the helpers above keep during one call (the lower-case locals
-- outside any function), made new for every call. A script sent with
-- EVALSHA gets fresh helpers on each call anyway; as a Redis Function (see
-- scripts.rs) it shares them with every call before it, so it starts with
-- this. A test checks that every such local is reset here.
local function begin_call()
  key_types, write_checks, clock_us = {}, nil, 0
  tally_fields, tally, stat_values = {}, {}, {}
  host_cache, host_dirty, host_dirty_list = {}, {}, {}
  slot_due, paused_read = nil, nil
end
