-- Commit a batch of pages: for each page, release its lease and, in the
-- same atomic step, enqueue its new requests (deduplicated), push its
-- items, record a failure or a dead letter, schedule its retry, adjust its
-- host's back-off and schedule or drop its revisit; count the batch's
-- stats. Only while worker ARGV[1] still holds every page's lease: a page
-- is committed once. Then lease as many requests as the pages asked for to
-- replace them, so a busy worker needs at most one round trip per page,
-- and fewer when pages finish together.
--
-- Stats are summed over the batch (by the worker, and here for what the
-- script counts) and written once each; the queue's wake channel is
-- published once.
--
-- KEYS: 1-17 as in lease.lua (requests, data, in-flight, owners, dead,
--       stats, delayed, delayed scores, pace, host delays, back-off,
--       sequence, revisit schedule, its requests, revisits queued, crawl
--       control, pages per host), 18 dupefilter, 19 items (the list or
--       the stream, by ARGV 15), 20 failed, 21 dupefilter meta, 22
--       back-off error shares, then one start key per spider links are
--       handed to (`to_spider`)
-- ARGV: 1 worker, 2 wake channel, 3 lease ms, 4 politeness interval ms,
--       5 randomise it (1/0), 6 longest back-off ms, 7 longest politeness
--       wait worth leasing for (ms), 8 dupefilter spec, 9 #spiders handed
--       to, 10 max_pages, 11 max_pages_per_host, 12 put due work back in
--       the queue first (1/0, see lease_requests), 13 #pages, 14 #stat
--       pairs, 15 item sink (see item_sink), then per spider handed to its
--       start key type and wake channel, the stat pairs (field, delta:
--       the pages' stats summed),
--       then each page:
--         +0 request id, +1 #requests, +2 #items, +3 #tasks, +4 depth of
--         its new requests, +5 dead-letter JSON or '', +6 failed JSON or
--         '', +7 retry delay ms (-1: no retry), +8 the retried request's
--         JSON, +9 its priority, +10 host outcome ('slow' for 429 or a
--         5xx with Retry-After, 'error' for another 5xx, 'ok', or ''),
--         +11 ms the server asked to wait (Retry-After), +12 revisit
--         ('at': schedule the page again, 'drop': take it off the
--         schedule, '' neither), +13 the page's fingerprint, +14 ms
--         until it is due, +15 the request JSON that fetches it again,
--         +16 requests to lease to replace it, +17 its request's host (its
--         politeness key, see host_of; '' if unknown),
--         then #tasks quadruples (spider number, fingerprint, priority,
--         task JSON), #requests triples (fingerprint, priority, JSON),
--         #items JSON strings.
-- Returns {1, enqueued1, filtered1, ..., id1, json1, wait1, interval1,
-- ...}: per page what it queued and filtered, then the new leases. If the
-- lease of any page is no longer this worker's, nothing is written and it
-- returns {-1, page number, ...} (those pages, counted from 1): the worker
-- sends the batch again without them and their stats.
local PAGE_HEAD = 18
local K = shared_keys()
K.errors = KEYS[22]
local items_key, failed_key = KEYS[19], KEYS[20]
K.items, K.sink = items_key, item_sink(ARGV[15])
local worker, channel = ARGV[1], ARGV[2]
local backoff_max = tonumber(ARGV[6])
local n_targets, n_pages, n_stats = tonumber(ARGV[9]), tonumber(ARGV[13]), tonumber(ARGV[14])

local at = 16
local targets = {}
for i = 1, n_targets do
  targets[i] = {key = KEYS[22 + i], kind = ARGV[at], channel = ARGV[at + 1], pushed = 0}
  at = at + 2
end
local stats_at = at
at = at + 2 * n_stats

-- Every page's place in ARGV, and whether its lease is still ours, before
-- anything is written.
-- What the batch will do besides releasing its leases, for the keys to
-- check.
local pages, ids, wanted, n_tasks_all = {}, {}, 0, 0
local n_requests_all, retries, deads, fails, news_host, revisits, leases = 0, false, false, false, nil, false, 0
for i = 1, n_pages do
  local p = at
  local n_requests, n_items, n_tasks = num(ARGV[p + 1]), num(ARGV[p + 2]), num(ARGV[p + 3])
  pages[i] = {p, n_requests, n_items, n_tasks}
  ids[i] = ARGV[p]
  wanted = wanted + n_requests + 1
  n_tasks_all = n_tasks_all + n_tasks
  n_requests_all = n_requests_all + n_requests
  retries = retries or ARGV[p + 7] ~= '-1'
  deads = deads or ARGV[p + 5] ~= ''
  fails = fails or ARGV[p + 6] ~= ''
  if not news_host and ARGV[p + 17] ~= '' and ARGV[p + 10] ~= '' then
    news_host = ARGV[p + 17]
  end
  revisits = revisits or ARGV[p + 12] ~= ''
  leases = leases + num(ARGV[p + 16])
  at = p + PAGE_HEAD + 4 * n_tasks + 3 * n_requests + n_items
end
local owner_prefix = worker .. '|'
local lost = {-1}
local owners = prove_by('hash', 'leases', 'HMGET', K.owners, unpack(ids))
-- A page twice in one batch (its worker's lease expired while the first
-- commit waited, and the worker leased and fetched it again) finds the
-- lease its worker's both times: only the first is committed.
local seen = {}
for i = 1, n_pages do
  local owner = owners[i]
  if not owner or string.sub(owner, 1, #owner_prefix) ~= owner_prefix or seen[ids[i]] then
    lost[#lost + 1] = i
  end
  seen[ids[i]] = true
end
if #lost > 1 then
  return lost
end
local wrong_sink = sink_type_error(items_key, K.sink)
if wrong_sink then
  return wrong_sink
end

local dupe = dupe_config(ARGV[8], KEYS[18], KEYS[21])
local release = ARGV[12] == '1'

-- Every key the batch will write, or read after its first write, is
-- proved before anything is written (see need): the commit is whole or
-- not at all. The reads the batch needs come first, and prove their keys
-- without a TYPE each.
--
-- With the exact dupefilter (a set) and no links handed to other spiders,
-- one SMISMEMBER tells which of the batch's fingerprints were seen, and
-- one SADD records the new ones. Otherwise each request goes through the
-- dupefilter in turn, as handed links do (so a link both handed and
-- queued is decided in page order).
local known
if dupe and dupe.mode == 'exact' and n_tasks_all == 0 then
  known = {}
  local fps = {}
  for _, page in ipairs(pages) do
    local p, n_requests = page[1], page[2]
    for r = p + PAGE_HEAD, p + PAGE_HEAD + 3 * (n_requests - 1), 3 do
      if ARGV[r] ~= '' then
        fps[#fps + 1] = ARGV[r]
      end
    end
  end
  for first = 1, #fps, 1000 do
    local last = math.min(first + 999, #fps)
    local seen = prove_by('set', 'dupefilter', 'SMISMEMBER', dupe.key, unpack(fps, first, last))
    for i = first, last do
      if seen[i - first + 1] == 1 then
        known[fps[i]] = true
      end
    end
  end
end
-- The stats the batch counts, read now (see flush_tally).
local stat_fields = {STAT.SCHEDULER_ENQUEUED, STAT.DUPEFILTER_FILTERED, STAT.REQUEST_DEPTH_MAX,
                     STAT.SCHEDULER_DEQUEUED}
for i = stats_at, stats_at + 2 * n_stats - 1, 2 do
  stat_fields[#stat_fields + 1] = ARGV[i]
end
read_stats(K.stats, stat_fields)
if leases > 0 then
  paused(K)
end
-- The per-host hashes host_news writes (and reserve_slot reads), proved
-- by reading the first host with news (the same hosts' replacements are
-- mostly leased too).
if news_host then
  host_get(K.backoff, news_host, 'backoff')
  host_get(K.errors, news_host, 'backoff_errors')
  host_get(K.pace, news_host, 'pace')
  if leases > 0 then
    host_get(K.host_delay, news_host, 'host_delay')
  end
end

need(K.inflight, 'zset', 'inflight')
need(K.data, 'hash', 'request_data')
if n_requests_all > 0 or retries then
  need(K.requests, 'zset', 'requests')
end
if retries then
  need(K.delayed, 'zset', 'delayed')
  need(K.delayed_scores, 'hash', 'delayed_scores')
end
if deads then
  need(K.dead, 'list', 'dead')
end
if revisits then
  need(K.schedule, 'zset', 'schedule')
  need(K.schedule_data, 'hash', 'schedule_data')
  need(K.schedule_due, 'zset', 'schedule_due')
end
if leases > 0 or release then
  need_lease_keys(K, tonumber(ARGV[11]), release)
end
if fails then
  need(failed_key, 'list', 'failed')
end
if n_requests_all > 0 or n_tasks_all > 0 then
  need_dupe(dupe)
end
if n_tasks_all > 0 then
  for _, t in ipairs(targets) do
    need(t.key, t.kind, 'start_urls of a to_spider')
  end
end
local now = now_ms()
-- Sequence numbers for every request the batch may queue (retries too);
-- the first block is the batch's first write, and proves its key.
local next_seq = seq_block(K.seq, wanted, n_requests_all > 0 or retries)
for i = stats_at, stats_at + 2 * n_stats - 1, 2 do
  count(ARGV[i], ARGV[i + 1])
end

local new_fps, queue_args, data_args = {}, {}, {}

-- Whether a request with fingerprint `fp` is new (and now remembered).
local function first_seen(fp)
  if fp == '' or not dupe then
    return true
  elseif known then
    if known[fp] then
      return false
    end
    known[fp] = true
    new_fps[#new_fps + 1] = fp
    return true
  end
  return dupe_add(dupe, fp, now)
end

-- Adaptive back-off, shared by the cluster. Two signals set a host's
-- delay (the back-off hash, which reserve_slot applies to every slot):
--
-- * Strict: a 429, or a 5xx with Retry-After ('slow'), doubles the delay
--   (at least 1 s, at least Retry-After, at most the longest back-off) and
--   keeps everyone away until Retry-After has passed; each good response
--   takes a fifth off again.
-- * Proportional: every 5xx or 429 ('error', 'slow') and good response
--   ('ok') moves the host's error share e (per mille, the errors hash) a
--   tenth of the way to 1000 or 0, an exponentially weighted average over
--   about the last ten responses. Up to ERROR_TOLERATED (one in five) the
--   host keeps full speed; above it the delay climbs exponentially to the
--   longest back-off at e = 1000 (error_delay). So a busy server's
--   sporadic 503s cost nothing, one failing everything backs off hard, and
--   it recovers as fast as its good responses bring e down.
--
-- The delay stored is the larger of the two. Whatever of it the error
-- share does not explain is the strict part, so no third number is kept.
local ERROR_WEIGHT, ERROR_TOLERATED, ERROR_STEEPNESS = 0.1, 200, 10
local ERROR_CURVE = 2 ^ ERROR_STEEPNESS - 1

-- The delay (ms) an error share of `e` per mille calls for.
local function error_delay(e)
  if e <= ERROR_TOLERATED then
    return 0
  end
  local u = (e - ERROR_TOLERATED) / (1000 - ERROR_TOLERATED)
  return math.floor(backoff_max * (2 ^ (ERROR_STEEPNESS * u) - 1) / ERROR_CURVE)
end

-- A host that keeps back-off state gets a slot at least at now (a slot
-- in the past is no slot at all): the time it was last heard of, by which
-- sweep.lua forgets the state of a host left alone.
local function mark_active(host, keeps_state)
  if keeps_state and host_get(K.pace, host) < now then
    host_set(K.pace, host, now)
  end
end

local function host_news(host, outcome, wait)
  local old = host_get(K.backoff, host)
  local old_e = host_get(K.errors, host)
  -- Most news: a good response from a host with no back-off and no
  -- errors, which changes nothing.
  if outcome == 'ok' and old == 0 and old_e == 0 then
    return
  end
  local e = math.floor(old_e * (1 - ERROR_WEIGHT) + (outcome == 'ok' and 0 or 1000 * ERROR_WEIGHT))
  local strict = 0
  if old > error_delay(old_e) then
    strict = old
  end
  if outcome == 'slow' then
    wait = tonumber(wait)
    strict = math.min(math.max(old * 2, 1000, wait), backoff_max)
    if now + wait > host_get(K.pace, host) then
      host_set(K.pace, host, now + wait)
    end
  elseif outcome == 'ok' then
    strict = math.floor(strict * 0.8)
    if strict < 50 then
      strict = 0
    end
  end
  local new = math.max(strict, error_delay(e))
  if new > 0 then
    if new ~= old then
      host_set(K.backoff, host, new)
    end
  elseif old > 0 then
    host_del(K.backoff, host)
  end
  -- A share under 1 % is forgotten, so healthy hosts leave no entry.
  if e >= 10 then
    if e ~= old_e then
      host_set(K.errors, host, e)
    end
  elseif old_e > 0 then
    host_del(K.errors, host)
  end
  if outcome == 'slow' or (outcome == 'error' and new > 0) then
    count(STAT.BACKOFF_SLOWED, 1)
  end
  mark_active(host, new > 0 or e >= 10)
end

local out = {1}
local items, done_data, dead, failed = {}, {}, {}, {}
local retry_data, retry_scores, retry_due = {}, {}, {}
local enqueued_all, filtered_all, depth_max, lease_next = 0, 0, -1, 0
call_many('ZREM', K.inflight, ids)
call_many('HDEL', K.owners, ids)
for _, page in ipairs(pages) do
  local p, n_requests, n_items, n_tasks = page[1], page[2], page[3], page[4]
  local id = ARGV[p]
  at = p + PAGE_HEAD
  lease_next = lease_next + num(ARGV[p + 16])

  if ARGV[p + 7] ~= '-1' then
    local retry_ms = tonumber(ARGV[p + 7])
    -- The same id waits in the delayed set, then returns to the queue.
    retry_data[#retry_data + 1] = id
    retry_data[#retry_data + 1] = ARGV[p + 8]
    retry_scores[#retry_scores + 1] = id
    retry_scores[#retry_scores + 1] = int(queue_score(ARGV[p + 9], next_seq()))
    retry_due[#retry_due + 1] = int(now + retry_ms)
    retry_due[#retry_due + 1] = id
  else
    done_data[#done_data + 1] = id
  end

  -- Counted where they are written, so the stats and the keys agree.
  if ARGV[p + 5] ~= '' then
    dead[#dead + 1] = ARGV[p + 5]
    count(STAT.DEADLETTER_COUNT, 1)
  end
  if ARGV[p + 6] ~= '' then
    failed[#failed + 1] = ARGV[p + 6]
    count(STAT.FAILED_COUNT, 1)
  end

  local host = ARGV[p + 17]
  if host ~= '' and ARGV[p + 10] ~= '' then
    host_news(host, ARGV[p + 10], ARGV[p + 11])
  end

  -- A page a revisit rule fetched is due again (whether it came from the
  -- schedule or not), or leaves the schedule; either way its revisit is
  -- no longer overdue.
  local revisit, revisit_fp = ARGV[p + 12], ARGV[p + 13]
  if revisit ~= '' then
    redis.call('ZREM', K.schedule_due, revisit_fp)
    if revisit == 'at' then
      redis.call('ZADD', K.schedule, now + tonumber(ARGV[p + 14]), revisit_fp)
      redis.call('HSET', K.schedule_data, revisit_fp, ARGV[p + 15])
    elseif redis.call('ZREM', K.schedule, revisit_fp) + redis.call('HDEL', K.schedule_data, revisit_fp) > 0 then
      count(STAT.REVISIT_DROPPED, 1)
    end
  end

  local enqueued, filtered = 0, 0
  -- A handed link passes this spider's dupefilter, then becomes a task on
  -- the other spider's start key.
  for _ = 1, n_tasks do
    local t = targets[tonumber(ARGV[at])]
    if not first_seen(ARGV[at + 1]) then
      filtered = filtered + 1
    else
      if t.kind == 'list' then
        redis.call('RPUSH', t.key, ARGV[at + 3])
      elseif t.kind == 'set' then
        redis.call('SADD', t.key, ARGV[at + 3])
      else
        redis.call('ZADD', t.key, ARGV[at + 2], ARGV[at + 3])
      end
      t.pushed = t.pushed + 1
      count(STAT.SCHEDULER_HANDED_OFF, 1)
    end
    at = at + 4
  end
  for _ = 1, n_requests do
    if first_seen(ARGV[at]) then
      local n = next_seq()
      local seq = int(n)
      queue_args[#queue_args + 1] = int(queue_score(ARGV[at + 1], n))
      queue_args[#queue_args + 1] = seq
      data_args[#data_args + 1] = seq
      data_args[#data_args + 1] = ARGV[at + 2]
      enqueued = enqueued + 1
    else
      filtered = filtered + 1
    end
    at = at + 3
  end
  if enqueued > 0 then
    depth_max = math.max(depth_max, tonumber(ARGV[p + 4]))
  end
  enqueued_all = enqueued_all + enqueued
  filtered_all = filtered_all + filtered
  for i = at, at + n_items - 1 do
    items[#items + 1] = ARGV[i]
  end
  out[#out + 1] = enqueued
  out[#out + 1] = filtered
end
count(STAT.SCHEDULER_ENQUEUED, enqueued_all)
count(STAT.DUPEFILTER_FILTERED, filtered_all)
call_many('HDEL', K.data, done_data)
call_many('HSET', K.data, retry_data)
call_many('HSET', K.delayed_scores, retry_scores)
call_many('ZADD', K.delayed, retry_due)
call_many('RPUSH', K.dead, dead)
call_many('RPUSH', failed_key, failed)
if dupe then
  call_many('SADD', dupe.key, new_fps)
end
call_many('ZADD', K.requests, queue_args)
call_many('HSET', K.data, data_args)
push_items(items_key, K.sink, items)
for _, t in ipairs(targets) do
  if t.pushed > 0 then
    redis.call('PUBLISH', t.channel, int(t.pushed))
  end
end
if enqueued_all > 0 then
  if depth_max > stat_values[STAT.REQUEST_DEPTH_MAX] then
    redis.call('HSET', K.stats, STAT.REQUEST_DEPTH_MAX, int(depth_max))
  end
  redis.call('PUBLISH', channel, int(enqueued_all))
end
lease_requests(K, worker, tonumber(ARGV[3]), lease_next, now, tonumber(ARGV[4]), ARGV[5] == '1', tonumber(ARGV[7]),
  tonumber(ARGV[10]), tonumber(ARGV[11]), ARGV[12] == '1', out)
-- The last pages of a crawl: nothing is in flight any more, so idle
-- workers (waiting for `--until-drained` to see the crawl drained, or for
-- work) look again now rather than at their next recheck.
if enqueued_all == 0 and redis.call('ZCARD', K.inflight) == 0 then
  redis.call('PUBLISH', channel, '0')
end
flush_hosts()
flush_tally(K.stats)
return out
