-- The second step of moving an outbox (see lib/outbox.lua), on the
-- target shard: queues the entries of another shard's outbox (VALUE
-- records), each through this shard's dupefilter, except those with a
-- token this shard queued before (K.inbox: token → when, ms, forgotten
-- after INBOX_KEEP_MS), and wakes the workers waiting for work here. A
-- repeat (a mover that died before trimming what it delivered) so queues
-- nothing twice, dont_filter requests included. An entry crawlworker did
-- not write goes to the dead letters, with the outbox (A.outbox) it came
-- from.
--
-- An entry whose token is `to:<spider>:<token>` is a task a page of
-- another shard handed to that spider (`to_spider`) for a link of this
-- shard's hosts: it passes this shard's dupefilter here and goes on to
-- this shard's hand-off outbox for the spider (K.handoffs, in the order
-- of the names in A.handoff_spiders), with its own token, for
-- handoff_deliver. One for a spider this one no longer hands to is set
-- aside as a dead letter.
--
-- Keys, arguments and records: `outbox_deliver` in protocol.rs. Returns
-- {enqueued, filtered, skipped, unreadable}: tasks handed on count as
-- enqueued.
local flat, _, bad = outbox_read(REST)
local R = OUTBOX_RECORD
-- The tokens this shard queued before: those entries are skipped.
local seen = tokens_taken(K.inbox, flat)
local new, skipped = {}, 0
for i = 1, #flat, R.size do
  if seen[flat[i + R.token]] then
    skipped = skipped + 1
  else
    for f = 0, R.size - 1 do
      new[#new + 1] = flat[i + f]
    end
  end
end
-- The tasks for another spider, apart from the requests.
local handoff_of = {}
local n_names = 0
for name in string.gmatch(A.handoff_spiders, '%S+') do
  n_names = n_names + 1
  handoff_of[name] = K.handoffs[n_names]
end
local requests, tasks = {}, {}
for i = 1, #new, R.size do
  local spider, token = string.match(new[i + R.token], '^to:([^:]*):(.*)$')
  local into = requests
  if spider then
    into = tasks
    if not handoff_of[spider] then
      bad[#bad + 1] = table.concat(new, '|', i, i + R.size - 1)
      into = nil
    end
  end
  if into then
    for f = 0, R.size - 1 do
      into[#into + 1] = new[i + f]
    end
    if spider then
      into[#into + 1] = spider
      into[#into + 1] = token
    end
  end
end
local T = {size = R.size + 2, token = R.token, fingerprint = R.fingerprint, priority = R.priority, json = R.json,
           spider = R.size, inner = R.size + 1}
local queued = #requests / R.size
local fps = link_fingerprints(1, queued, R, {}, requests)
link_fingerprints(1, #tasks / T.size, T, fps, tasks)
if #new == 0 and #bad == 0 then
  return {0, 0, skipped, 0}
end
local dupe = dupe_config(A.dupe_spec, K.dupefilter, K.dupefilter_meta)
local now = now_ms()
local gate = link_gate(dupe, fps, now)
read_stats(K.stats, {STAT.SCHEDULER_ENQUEUED, STAT.DUPEFILTER_FILTERED, STAT.DEADLETTER_COUNT})
need(K.requests, 'zset', 'requests')
need(K.request_data, 'hash', 'request_data')
need(K.inflight, 'zset', 'inflight')
need(K.crew, 'zset', 'crew')
need(K.waiting, 'hash', 'waiting')
need(K.dead, 'list', 'dead')
need(K.inbox, 'zset', 'inbox')
for _, outbox in ipairs(K.handoffs) do
  need(outbox, 'list', 'hand-off outbox')
end
need_dupe(dupe)

-- Tasks handed on draw from the sequence too: every step that brings
-- work to this shard moves it (see ShardedFrontier's status).
local next_seq = seq_block(K.sequence, #new / R.size, true)
-- Set aside what does not parse (after the first write, which proves the
-- sequence), so the outbox can be trimmed past it.
for _, entry in ipairs(bad) do
  local task_for = string.match(entry, '^to:([^:]*):')
  redis.call('RPUSH', K.dead, cjson.encode({
    key = A.outbox, entry = escaped(string.sub(entry, 1, 1024)), bytes = #entry,
    reason = task_for and ('a task for spider ' .. task_for .. ', which this spider does not hand links to (any more)')
      or 'outbox entry not written by crawlworker (not <token>|<fingerprint>|<priority>|<request>)',
    time = now / 1000,
  }))
end
count(STAT.DEADLETTER_COUNT, #bad)

local queue_args, data_args = {}, {}
local enqueued, filtered = queue_links(1, queued, R, gate, next_seq, queue_args, data_args, requests)
local handed = 0
for i = 1, #tasks, T.size do
  local fp = tasks[i + T.fingerprint]
  if gate.first_seen(fp) then
    local outbox = handoff_of[tasks[i + T.spider]]
    redis.call('RPUSH', outbox, tasks[i + T.inner] .. '|' .. fp .. '|' .. tasks[i + T.priority] .. '|' ..
      tasks[i + T.json])
    handed = handed + 1
  else
    filtered = filtered + 1
  end
end
count(STAT.SCHEDULER_HANDED_OFF, handed)
enqueued = enqueued + handed
gate.record()
call_many('ZADD', K.requests, queue_args)
call_many('HSET', K.request_data, data_args)
local remembered = {}
for i = 1, #new, R.size do
  if new[i + R.token] ~= '' then
    remembered[#remembered + 1] = int(now)
    remembered[#remembered + 1] = new[i + R.token]
  end
end
call_many('ZADD', K.inbox, remembered)
forget_old_tokens(K.inbox, now)
count(STAT.SCHEDULER_ENQUEUED, enqueued)
count(STAT.DUPEFILTER_FILTERED, filtered)
if enqueued > 0 then
  hand_waiting(K, A.wake, enqueued, fair_room(K, A.mover, 0, now))
end
flush_tally(K.stats)
return {enqueued, filtered, skipped, #bad}
