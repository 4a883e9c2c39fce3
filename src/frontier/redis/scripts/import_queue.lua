-- Convert entries of a scrapy-redis queue set aside (see import_stage.lua)
-- in one step: each entry leaves the scrapy_queue key only in the step
-- that queues its request, or that sets it aside as a dead letter. An
-- entry already gone (another import took it) is skipped, so however
-- imports are stopped and started again, each entry becomes one request
-- or one dead letter. Requests skip the dupefilter: scrapy-redis recorded
-- their fingerprints when it queued them. In a sharded spider (imported
-- on shard 0), a request of another shard goes to this shard's outbox for
-- it (K.outboxes, in the order of the other shards; see lib/outbox.lua),
-- without fingerprint and with a token, so that its shard queues it once
-- and unfiltered too: its outcome is the outbox's place in K.outboxes.
--
-- Keys, arguments and IMPORT records: `import_queue` in protocol.rs.
-- A.kind is the scrapy_queue key's type: 'list' (an entry is taken from
-- the tail, where scrapy-redis's FIFO queue pops) or 'zset'.
-- Returns {queued, dead, handed to other shards}.
need(K.requests, 'zset', 'requests')
need(K.request_data, 'hash', 'request_data')
need(K.sequence, 'string', 'sequence')
need(K.dead, 'list', 'dead')
need(K.stats, 'hash', 'stats')
need(K.scrapy_queue, A.kind, 'scrapy_queue')
for _, outbox in ipairs(K.outboxes) do
  need(outbox, 'list', 'outbox')
end
-- No fingerprint: the request is not filtered again on its shard.
local handed_link = {size = IMPORT.SIZE, token = IMPORT.token, priority = IMPORT.priority, json = IMPORT.json}
local queued, dead, handed = 0, 0, 0
local next_seq = seq_block(K.sequence, (#ARGV - REST + 1) / IMPORT.SIZE)
for i = REST, #ARGV, IMPORT.SIZE do
  local entry = ARGV[i + IMPORT.entry]
  local removed
  if A.kind == 'list' then
    removed = redis.call('LREM', K.scrapy_queue, -1, entry)
  else
    removed = redis.call('ZREM', K.scrapy_queue, entry)
  end
  local outbox = K.outboxes[tonumber(ARGV[i + IMPORT.outcome]) or 0]
  if removed > 0 and outbox then
    outbox_push(outbox, i, 1, handed_link)
    handed = handed + 1
  elseif removed > 0 then
    if ARGV[i + IMPORT.outcome] == 'req' then
      enqueue(K.requests, K.request_data, nil, next_seq, '', ARGV[i + IMPORT.priority], ARGV[i + IMPORT.json], 0)
      queued = queued + 1
    else
      redis.call('RPUSH', K.dead, ARGV[i + IMPORT.json])
      dead = dead + 1
    end
  end
end
if queued + handed > 0 then
  redis.call('HINCRBY', K.stats, STAT.SCRAPY_REDIS_IMPORTED, queued + handed)
end
if queued > 0 then
  redis.call('PUBLISH', A.wake, queued)
end
if dead > 0 then
  redis.call('HINCRBY', K.stats, STAT.DEADLETTER_COUNT, dead)
end
return {queued, dead, handed}
