-- Convert entries of a scrapy-redis queue set aside (see import_stage.lua)
-- in one step: each entry leaves the scrapy_queue key only in the step
-- that queues its request, or that sets it aside as a dead letter. An
-- entry already gone (another import took it) is skipped, so however
-- imports are stopped and started again, each entry becomes one request
-- or one dead letter. Requests skip the dupefilter: scrapy-redis recorded
-- their fingerprints when it queued them.
--
-- Keys, arguments and IMPORT records: `import_queue` in protocol.rs.
-- A.kind is the scrapy_queue key's type: 'list' (an entry is taken from
-- the tail, where scrapy-redis's FIFO queue pops) or 'zset'.
-- Returns {queued, dead}.
need(K.requests, 'zset', 'requests')
need(K.request_data, 'hash', 'request_data')
need(K.sequence, 'string', 'sequence')
need(K.dead, 'list', 'dead')
need(K.stats, 'hash', 'stats')
need(K.scrapy_queue, A.kind, 'scrapy_queue')
local queued, dead = 0, 0
local next_seq = seq_block(K.sequence, (#ARGV - REST + 1) / IMPORT.SIZE)
for i = REST, #ARGV, IMPORT.SIZE do
  local entry = ARGV[i + IMPORT.entry]
  local removed
  if A.kind == 'list' then
    removed = redis.call('LREM', K.scrapy_queue, -1, entry)
  else
    removed = redis.call('ZREM', K.scrapy_queue, entry)
  end
  if removed > 0 then
    if ARGV[i + IMPORT.outcome] == 'req' then
      enqueue(K.requests, K.request_data, nil, next_seq, '', ARGV[i + IMPORT.priority], ARGV[i + IMPORT.json], 0)
      queued = queued + 1
    else
      redis.call('RPUSH', K.dead, ARGV[i + IMPORT.json])
      dead = dead + 1
    end
  end
end
if queued > 0 then
  redis.call('HINCRBY', K.stats, STAT.SCRAPY_REDIS_IMPORTED, queued)
  redis.call('PUBLISH', A.wake, queued)
end
if dead > 0 then
  redis.call('HINCRBY', K.stats, STAT.DEADLETTER_COUNT, dead)
end
return {queued, dead}
