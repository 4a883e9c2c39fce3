-- Set a scrapy-redis queue aside for `import-queue`: the requests
-- scrapy-redis queued in the requests key (pickles: a zset scored by
-- -priority, or a list for its FIFO and LIFO queues) move to the
-- scrapy_queue key as they are, so that the requests key is crawlworker's
-- queue from then on and each entry can be converted from there.
--
-- A whole queue moves with one RENAME. Entries that come after a first
-- move (a list pushed to since) follow in batches of A.batch, in their
-- order; in a zset that holds crawlworker's requests too, the members
-- without request data move, a window of A.batch from rank A.from at a
-- time.
--
-- Keys and arguments: `import_stage` in protocol.rs.
-- Returns {type, moved, done, next rank}: type is what the requests key
-- held ('none', 'list' or 'zset'); done is 1 when nothing is left to move.
local queue_type = redis.call('TYPE', K.requests).ok
local aside_type = redis.call('TYPE', K.scrapy_queue).ok
if queue_type == 'none' then
  return {aside_type, 0, 1, 0}
end
if queue_type ~= 'list' and queue_type ~= 'zset' then
  error(redis.error_reply(string.format(
    'WRONGTYPE key %s ([keys] requests) is a %s: neither a scrapy-redis queue nor crawlworker\'s; nothing was moved',
    K.requests, queue_type)))
end
if aside_type == 'list' and queue_type == 'zset'
    and redis.call('EXISTS', K.request_data) == 1 then
  -- An import of a list queue stopped part-way: the zset is crawlworker's
  -- queue (scrapy-redis cannot push a list entry into it), nothing new to
  -- move; the entries set aside are converted from where they are.
  return {'list', 0, 1, 0}
end
if aside_type ~= 'none' and aside_type ~= queue_type then
  error(redis.error_reply(string.format(
    'WRONGTYPE key %s ([keys] scrapy_queue) is a %s but %s is a %s: finish or delete the earlier import first; nothing was moved',
    K.scrapy_queue, aside_type, K.requests, queue_type)))
end
local batch = tonumber(A.batch)

if queue_type == 'list' then
  if aside_type == 'none' then
    local n = redis.call('LLEN', K.requests)
    redis.call('RENAME', K.requests, K.scrapy_queue)
    return {'list', n, 1, 0}
  end
  -- scrapy-redis pushes at the head: the oldest new entry goes first, to
  -- the head of the entries set aside, which keeps the order.
  local moved = 0
  while moved < batch and redis.call('RPOPLPUSH', K.requests, K.scrapy_queue) do
    moved = moved + 1
  end
  return {'list', moved, redis.call('EXISTS', K.requests) == 0 and 1 or 0, 0}
end

if aside_type == 'none' and redis.call('EXISTS', K.request_data) == 0 then
  local n = redis.call('ZCARD', K.requests)
  redis.call('RENAME', K.requests, K.scrapy_queue)
  return {'zset', n, 1, 0}
end
local from = tonumber(A.from)
local window = redis.call('ZRANGE', K.requests, from, from + batch - 1, 'WITHSCORES')
if #window == 0 then
  return {'zset', 0, 1, from}
end
local ids = {}
for j = 1, #window, 2 do
  ids[#ids + 1] = window[j]
end
local data = redis.call('HMGET', K.request_data, unpack(ids))
local kept, moved = 0, 0
for j = 1, #ids do
  if data[j] then
    kept = kept + 1
  else
    redis.call('ZREM', K.requests, ids[j])
    redis.call('ZADD', K.scrapy_queue, window[2 * j], ids[j])
    moved = moved + 1
  end
end
return {'zset', moved, 0, from + kept}
