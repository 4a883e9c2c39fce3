-- Commit a batch of pages: for each page, release its lease and, in the
-- same atomic step, enqueue its new requests (deduplicated), push its
-- items, record a failure or a dead letter, schedule its retry, adjust its
-- host's back-off and schedule or drop its revisit; count the batch's
-- stats. Only while worker A.worker still holds every page's lease: a page
-- is committed once. Then lease as many requests as the pages asked for to
-- replace them, so a busy worker needs at most one round trip per page,
-- and fewer when pages finish together.
--
-- Stats are summed over the batch (by the worker, and here for what the
-- script counts) and written once each. The requests it queues and does
-- not lease itself are leased to as many waiting workers as can use them
-- and handed to each in its wake-up (see hand_waiting); its own leases
-- stay within the worker's fair share (see fair_room).
--
-- Keys, arguments and records: `commit` in protocol.rs. After the head
-- arguments (A) come the spiders links are handed to (HANDOFF records,
-- their start keys in K.handoff_starts; in a sharded spider, this
-- shard's hand-off outboxes for them instead, of kind 'handoff', then
-- this shard's outboxes, of kind 'outbox': see lib/outbox.lua; after
-- those keys, each start key's spider's waiting workers' hash, in the
-- same order), the stat
-- increments (STAT_PAIR:
-- the pages' stats summed), then each page: a PAGE record, its PAGE_RARE
-- record if PAGE.rare is '1' (a dead letter, a failure, a retry, a slow
-- host's wait, a revisit), then its n_tasks TASK records, n_links LINK
-- records and n_items item JSON strings.
-- Returns {status, enqueued1, filtered1, ..., id1, json1, wait1,
-- interval1, ...}: per page what it queued and filtered, then the new
-- leases. The status is 1, or HAND_BACK_REPLY when the worker holds over
-- HAND_BACK_OVER times its fair share of the crawl's leases (see
-- fair_room): it hands back the requests it cannot start now, for its
-- peers to start (frontier::hand_back). If the
-- lease of any page is no longer this worker's, nothing is written and it
-- returns {-1, page number, ...} (those pages, counted from 1): the worker
-- sends the batch again without them and their stats.
K.sink = item_sink(A.sink)
local worker, channel = A.worker, A.wake
local backoff_max = num(A.backoff_max_ms)
local n_targets, n_pages, n_stats = num(A.handoffs), num(A.pages), num(A.stat_pairs)

-- Targets whose tasks wait in an outbox of this shard for a mover,
-- rather than going to a start key (which wakes its spider's workers).
local QUEUED_KINDS = {outbox = true, handoff = true}
local at = REST
local targets = {}
local n_spiders = 0
for i = 1, n_targets do
  targets[i] = {key = K.handoff_starts[i], kind = ARGV[at + HANDOFF.kind], channel = ARGV[at + HANDOFF.wake],
                pushed = 0}
  if not QUEUED_KINDS[targets[i].kind] then
    n_spiders = n_spiders + 1
    targets[i].waiting = K.handoff_starts[n_targets + n_spiders]
  end
  at = at + HANDOFF.SIZE
end
local stats_at = at
at = at + STAT_PAIR.SIZE * n_stats

-- Every page's place in ARGV, and whether its lease is still ours, before
-- anything is written.
-- What the batch will do besides releasing its leases, for the keys to
-- check.
local pages, ids, items, wanted, n_tasks_all, n_dupe_tasks = new_list(), new_list(), new_list(), 0, 0, 0
local n_requests_all, retries, deads, fails, news_host, revisits, leases = 0, false, false, false, nil, false, 0
for i = 1, n_pages do
  local p = at
  local n_requests, n_items = num(ARGV[p + PAGE.n_links]), num(ARGV[p + PAGE.n_items])
  local n_tasks = num(ARGV[p + PAGE.n_tasks])
  -- Where its PAGE_RARE record is (false: it has none), and where its
  -- tasks start.
  local rare = ARGV[p + PAGE.rare] == '1' and p + PAGE.SIZE
  local body = p + PAGE.SIZE + (rare and PAGE_RARE.SIZE or 0)
  pages[i] = {p, n_requests, n_tasks, rare, body}
  ids[i] = ARGV[p + PAGE.id]
  wanted = wanted + n_requests + 1
  n_tasks_all = n_tasks_all + n_tasks
  -- Links handed to another spider pass this spider's dupefilter; those
  -- handed to another shard pass that shard's, when they are delivered.
  for r = body, body + TASK.SIZE * (n_tasks - 1), TASK.SIZE do
    if targets[num(ARGV[r + TASK.spider])].kind ~= 'outbox' then
      n_dupe_tasks = n_dupe_tasks + 1
    end
  end
  n_requests_all = n_requests_all + n_requests
  if rare then
    retries = retries or ARGV[rare + PAGE_RARE.retry_ms] ~= '-1'
    deads = deads or ARGV[rare + PAGE_RARE.dead] ~= ''
    fails = fails or ARGV[rare + PAGE_RARE.failed] ~= ''
    revisits = revisits or ARGV[rare + PAGE_RARE.revisit] ~= ''
  end
  if not news_host and ARGV[p + PAGE.host] ~= '' and ARGV[p + PAGE.host_outcome] ~= '' then
    news_host = ARGV[p + PAGE.host]
  end
  leases = leases + num(ARGV[p + PAGE.lease_next])
  at = body + TASK.SIZE * n_tasks + LINK.SIZE * n_requests
  for j = at, at + n_items - 1 do
    items[#items + 1] = ARGV[j]
  end
  at = at + n_items
end
-- (Blocks keep short-lived names out of the chunk's locals: a script sent
-- with EVALSHA, helpers and all, may have 200.)
do
  local owner_prefix = worker .. '|'
  local lost = {-1}
  local owners = prove_by('hash', 'leases', 'HMGET', K.leases, unpack(ids))
  -- A page twice in one batch (its worker's lease expired while the
  -- first commit waited, and the worker leased and fetched it again)
  -- finds the lease its worker's both times: only the first is committed.
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
end

local dupe = dupe_config(A.dupe_spec, K.dupefilter, K.dupefilter_meta)
local release = A.release == '1'

-- Every key the batch will write, or read after its first write, is
-- proved before anything is written (see need): the commit is whole or
-- not at all. The reads the batch needs come first, and prove their keys
-- without a TYPE each.
--
-- The batch's fingerprints are read up front (see link_gate) unless it
-- hands links to other spiders (not shards): then each request goes through the
-- dupefilter in turn, as handed links do, so a link both handed and
-- queued is decided in page order.
local link = {size = LINK.SIZE, fingerprint = LINK.fingerprint, priority = LINK.priority, json = LINK.json}
-- A TASK record handed to another shard, read as a link (its entry is the
-- request's JSON).
local task_link = {size = TASK.SIZE, token = TASK.token, fingerprint = TASK.fingerprint, priority = TASK.priority,
                   json = TASK.entry}
local fps = nil
if n_dupe_tasks == 0 then
  fps = new_list()
  for _, page in ipairs(pages) do
    link_fingerprints(page[5] + TASK.SIZE * page[3], page[2], link, fps)
  end
end
local now = now_ms()
local gate = link_gate(dupe, fps, now)
-- The stats the batch counts, read now (see flush_tally).
do
  local stat_fields = new_list()
  stat_fields[1], stat_fields[2], stat_fields[3], stat_fields[4] = STAT.SCHEDULER_ENQUEUED,
    STAT.DUPEFILTER_FILTERED, STAT.REQUEST_DEPTH_MAX, STAT.SCHEDULER_DEQUEUED
  for i = stats_at, stats_at + STAT_PAIR.SIZE * (n_stats - 1), STAT_PAIR.SIZE do
    stat_fields[#stat_fields + 1] = ARGV[i + STAT_PAIR.field]
  end
  read_stats(K.stats, stat_fields)
end
-- The queue's and the in-flight set's sizes, for the fair shares and the
-- end-of-crawl check (see read_queue_sizes).
read_queue_sizes(K)
-- A visitor's batch (A.visit: a sharded spider's worker whose home is
-- another shard, see frontier::redis::sharded) leases replacements only
-- while this shard has no crew, no worker whose home it is: the shard's
-- work stays with its own workers, and the visitor's next lease is at its
-- home (the pages' lease_next, summed again below, are then dropped:
-- `leases` is that sum). Nor does it join the crew.
if A.visit == '1' and leases > 0 and crew_count(K, worker, now) > 0 then
  leases = 0
end
if leases > 0 then
  paused(K)
end
-- The worker's place in the crew, for its fair share (see fair_room).
if leases > 0 or n_requests_all > 0 then
  crew_member(K, worker)
end
-- The per-host hashes host_news writes (and reserve_slot reads), proved
-- by reading the first host with news (the same hosts' replacements are
-- mostly leased too).
if news_host then
  host_get(K.backoff, news_host, 'backoff')
  host_get(K.backoff_errors, news_host, 'backoff_errors')
  host_get(K.pace, news_host, 'pace')
  if leases > 0 then
    host_get(K.host_delay, news_host, 'host_delay')
  end
end

need(K.inflight, 'zset', 'inflight')
need(K.request_data, 'hash', 'request_data')
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
if leases > 0 or release or n_requests_all > 0 then
  need_lease_keys(K, num(A.max_per_host), release)
end
if n_requests_all > 0 then
  need(K.crew, 'zset', 'crew')
end
if fails then
  need(K.failed, 'list', 'failed')
end
if n_requests_all > 0 or n_dupe_tasks > 0 then
  need_dupe(dupe)
end
if n_tasks_all > 0 then
  for _, t in ipairs(targets) do
    if t.kind == 'outbox' then
      need(t.key, 'list', 'outbox')
    elseif t.kind == 'handoff' then
      need(t.key, 'list', 'hand-off outbox')
    else
      need(t.key, t.kind, 'start_urls of a to_spider')
      need(t.waiting, 'hash', 'waiting of a to_spider')
    end
  end
end
-- Sequence numbers for every request the batch may queue (retries too);
-- the first block is the batch's first write, and proves its key.
local next_seq = seq_block(K.sequence, wanted, n_requests_all > 0 or retries)
-- Then the items, which prove their key (see push_items): a wrong one
-- leaves nothing written but a gap in the sequence numbers, which keeps
-- the order.
push_items(K.items, K.sink, items)
for i = stats_at, stats_at + STAT_PAIR.SIZE * (n_stats - 1), STAT_PAIR.SIZE do
  count(ARGV[i + STAT_PAIR.field], ARGV[i + STAT_PAIR.delta])
end

local queue_args, data_args = new_list(), new_list()

local out = new_list()
out[1] = 1
local done_data, dead, failed = new_list(), {}, {}
local retry_data, retry_scores, retry_due = {}, {}, {}
local enqueued_all, filtered_all, depth_max, lease_next = 0, 0, -1, 0
queue_sizes_moved(0, -call_many('ZREM', K.inflight, ids))
call_many('HDEL', K.leases, ids)
for _, page in ipairs(pages) do
  local p, n_requests, n_tasks, rare = page[1], page[2], page[3], page[4]
  local id = ARGV[p + PAGE.id]
  at = page[5]
  lease_next = lease_next + num(ARGV[p + PAGE.lease_next])

  if rare and ARGV[rare + PAGE_RARE.retry_ms] ~= '-1' then
    local retry_ms = tonumber(ARGV[rare + PAGE_RARE.retry_ms])
    -- The same id waits in the delayed set, then returns to the queue.
    retry_data[#retry_data + 1] = id
    retry_data[#retry_data + 1] = ARGV[rare + PAGE_RARE.retry_json]
    retry_scores[#retry_scores + 1] = id
    retry_scores[#retry_scores + 1] = int(queue_score(ARGV[rare + PAGE_RARE.retry_priority], next_seq()))
    retry_due[#retry_due + 1] = int(now + retry_ms)
    retry_due[#retry_due + 1] = id
  else
    done_data[#done_data + 1] = id
  end

  -- Counted where they are written, so the stats and the keys agree.
  if rare and ARGV[rare + PAGE_RARE.dead] ~= '' then
    dead[#dead + 1] = ARGV[rare + PAGE_RARE.dead]
    count(STAT.DEADLETTER_COUNT, 1)
  end
  if rare and ARGV[rare + PAGE_RARE.failed] ~= '' then
    failed[#failed + 1] = ARGV[rare + PAGE_RARE.failed]
    count(STAT.FAILED_COUNT, 1)
  end

  local host = ARGV[p + PAGE.host]
  if host ~= '' and ARGV[p + PAGE.host_outcome] ~= '' then
    host_news(K, host, ARGV[p + PAGE.host_outcome], rare and ARGV[rare + PAGE_RARE.slow_ms] or '0', now,
      backoff_max)
  end

  -- A page a revisit rule fetched is due again (whether it came from the
  -- schedule or not), or leaves the schedule; either way its revisit is
  -- no longer overdue.
  local revisit = rare and ARGV[rare + PAGE_RARE.revisit] or ''
  if revisit ~= '' then
    local revisit_fp = ARGV[rare + PAGE_RARE.revisit_fp]
    redis.call('ZREM', K.schedule_due, revisit_fp)
    if revisit == 'at' then
      redis.call('ZADD', K.schedule, now + tonumber(ARGV[rare + PAGE_RARE.revisit_ms]), revisit_fp)
      redis.call('HSET', K.schedule_data, revisit_fp, ARGV[rare + PAGE_RARE.revisit_json])
    elseif redis.call('ZREM', K.schedule, revisit_fp) + redis.call('HDEL', K.schedule_data, revisit_fp) > 0 then
      count(STAT.REVISIT_DROPPED, 1)
    end
  end

  local enqueued, filtered = 0, 0
  -- A link handed to another spider passes this spider's dupefilter, then
  -- becomes a task on the other spider's start key; one handed to another
  -- shard goes to this shard's outbox for it (see lib/outbox.lua).
  for _ = 1, n_tasks do
    local t = targets[num(ARGV[at + TASK.spider])]
    local entry = ARGV[at + TASK.entry]
    if t.kind == 'outbox' then
      outbox_push(t.key, at, 1, task_link)
      t.pushed = t.pushed + 1
    elseif not gate.first_seen(ARGV[at + TASK.fingerprint]) then
      filtered = filtered + 1
    else
      if t.kind == 'handoff' then
        outbox_push(t.key, at, 1, task_link)
      elseif t.kind == 'list' then
        redis.call('RPUSH', t.key, entry)
      elseif t.kind == 'set' then
        redis.call('SADD', t.key, entry)
      else
        redis.call('ZADD', t.key, ARGV[at + TASK.priority], entry)
      end
      t.pushed = t.pushed + 1
      count(STAT.SCHEDULER_HANDED_OFF, 1)
    end
    at = at + TASK.SIZE
  end
  local queued, dropped = queue_links(at, n_requests, link, gate, next_seq, queue_args, data_args)
  enqueued, filtered = enqueued + queued, filtered + dropped
  at = at + LINK.SIZE * n_requests
  if enqueued > 0 then
    depth_max = math.max(depth_max, num(ARGV[p + PAGE.depth]))
  end
  enqueued_all = enqueued_all + enqueued
  filtered_all = filtered_all + filtered
  out[#out + 1] = enqueued
  out[#out + 1] = filtered
end
count(STAT.SCHEDULER_ENQUEUED, enqueued_all)
count(STAT.DUPEFILTER_FILTERED, filtered_all)
call_many('HDEL', K.request_data, done_data)
call_many('HSET', K.request_data, retry_data)
call_many('HSET', K.delayed_scores, retry_scores)
call_many('ZADD', K.delayed, retry_due)
call_many('RPUSH', K.dead, dead)
call_many('RPUSH', K.failed, failed)
gate.record()
queue_sizes_moved(call_many('ZADD', K.requests, queue_args), 0)
call_many('HSET', K.request_data, data_args)
-- The tasks handed to another spider wake its waiting workers, as many
-- as they can use, each on its own channel (hand_waiting without a lease:
-- the tasks are start entries, which a woken worker claims); its busy
-- workers claim them when their own work runs short.
for _, t in ipairs(targets) do
  if t.pushed > 0 and not QUEUED_KINDS[t.kind] then
    hand_waiting({waiting = t.waiting}, t.channel, t.pushed, math.huge)
  end
end
if enqueued_all > 0 and depth_max > stat_values[STAT.REQUEST_DEPTH_MAX] then
  redis.call('HSET', K.stats, STAT.REQUEST_DEPTH_MAX, int(depth_max))
end
local before = #out
local max_pages = page_cap(K, num(A.max_pages), A.quota_shard)
local function lease(to, max, into, held, again)
  lease_requests(K, to, num(A.lease_ms), max, now, num(A.interval_ms), A.jitter == '1', num(A.max_wait_ms),
    max_pages, num(A.max_per_host), again, num(A.max_lease_expiries), held, into)
end
if leases == 0 then
  lease_next = 0
end
lease(worker, lease_next, out, num(A.held), release)
-- The requests queued that this commit did not lease are leased to the
-- workers waiting for work, as many as can use them, and handed to them
-- in their wake-ups (see hand_waiting): neither a wake-up that finds
-- nothing nor one that must ask Redis for its work costs a script call.
-- So are the parked requests its release put back (PARKING.back).
if enqueued_all + PARKING.back > 0 then
  local avail = enqueued_all + PARKING.back - (#out - before) / 4
  if avail > 0 then
    local fair = fair_room(K, worker, 0, now)
    hand_waiting(K, channel, avail, fair, worker, function(to, max, into)
      lease(to, max, into, 0, false)
    end)
  end
end
if (lease_next > 0 or release) and A.visit ~= '1' then
  crew_renew(K, worker, now, num(A.lease_ms), release)
end
if over_share then
  out[1] = HAND_BACK_REPLY
end
-- The last pages of a crawl: nothing is in flight any more and nothing
-- was queued, or `max_pages` (here, this shard's cap of it) is reached
-- with work left queued, so idle workers (waiting for `--until-drained`
-- to see the crawl drained or its limit reached, or for work) look again
-- now rather than at their next recheck.
do
  local _, in_flight = read_queue_sizes(K)
  if (enqueued_all == 0 or max_pages) and in_flight == 0
      and (enqueued_all == 0 or redis.call('HEXISTS', K.control, 'max_pages_reached') == 1) then
    redis.call('PUBLISH', channel, '0')
  end
end
flush_hosts()
flush_tally(K.stats)
return out
