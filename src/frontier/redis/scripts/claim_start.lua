-- Claim start entries: each entry leaves the start key only in this step,
-- which also enqueues its request (or sets it aside as a dead letter). An
-- entry another worker claimed first is skipped. In a sharded spider
-- (claimed on shard 0), a request of another shard goes to this shard's
-- outbox for it (K.outboxes, in the order of the other shards; see
-- lib/outbox.lua): its outcome is the outbox's place in K.outboxes.
--
-- Keys, arguments and CLAIM records: `claim_start` in protocol.rs.
-- Returns {claimed, enqueued, filtered, dead}.
local kind = A.start_kind
local dupe = dupe_config(A.dupe_spec, K.dupefilter, K.dupefilter_meta)
-- Every key it writes, before it writes any (see need).
need(K.start_urls, kind, 'start_urls')
need(K.requests, 'zset', 'requests')
need(K.request_data, 'hash', 'request_data')
need(K.sequence, 'string', 'sequence')
need(K.dead, 'list', 'dead')
need(K.stats, 'hash', 'stats')
need(K.waiting, 'hash', 'waiting')
need_dupe(dupe)
for _, outbox in ipairs(K.outboxes) do
  need(outbox, 'list', 'outbox')
end
local claim_link = {size = CLAIM.SIZE, token = CLAIM.token, fingerprint = CLAIM.fingerprint_or_stat,
                    priority = CLAIM.priority, json = CLAIM.json}
local now = now_ms()
local claimed, enqueued, filtered, dead = 0, 0, 0, 0
local next_seq = seq_block(K.sequence, (#ARGV - REST + 1) / CLAIM.SIZE)
for i = REST, #ARGV, CLAIM.SIZE do
  local entry = ARGV[i + CLAIM.entry]
  local removed
  if kind == 'list' then
    removed = redis.call('LREM', K.start_urls, 1, entry)
  elseif kind == 'set' then
    removed = redis.call('SREM', K.start_urls, entry)
  else
    removed = redis.call('ZREM', K.start_urls, entry)
  end
  if removed > 0 then
    claimed = claimed + 1
    local json, mark = ARGV[i + CLAIM.json], ARGV[i + CLAIM.fingerprint_or_stat]
    local outbox = K.outboxes[tonumber(ARGV[i + CLAIM.outcome]) or 0]
    if outbox then
      outbox_push(outbox, i, 1, claim_link)
    elseif ARGV[i + CLAIM.outcome] == 'dead' then
      redis.call('RPUSH', K.dead, json)
      dead = dead + 1
      if mark ~= '' then
        redis.call('HINCRBY', K.stats, mark, 1)
      end
    elseif enqueue(K.requests, K.request_data, dupe, next_seq, mark, ARGV[i + CLAIM.priority], json, now) == 1 then
      enqueued = enqueued + 1
    else
      filtered = filtered + 1
    end
  end
end
if enqueued > 0 then
  redis.call('HINCRBY', K.stats, STAT.SCHEDULER_ENQUEUED, enqueued)
  -- The claimer leases next; the workers waiting for work are woken, as
  -- many as the requests can use, each on its own channel (hand_waiting
  -- without a lease), rather than every worker of the spider.
  hand_waiting(K, A.wake, enqueued, math.huge)
end
if filtered > 0 then
  redis.call('HINCRBY', K.stats, STAT.DUPEFILTER_FILTERED, filtered)
end
if dead > 0 then
  redis.call('HINCRBY', K.stats, STAT.DEADLETTER_COUNT, dead)
end
if claimed > 0 then
  redis.call('HINCRBY', K.stats, STAT.START_URLS_CLAIMED, claimed)
end
return {claimed, enqueued, filtered, dead}
