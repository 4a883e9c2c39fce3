-- Bring one refused scrapy-redis import back (`import-queue --retry-dead`):
-- its dead letter A.letter leaves the dead letters, and the entry it kept
-- whole, A.entry, goes back among the entries set aside, to be converted
-- again by the import that follows. One step: a retry stopped part-way
-- loses and doubles nothing, and two at once move a letter once.
--
-- Keys and arguments: `import_retry` in protocol.rs.
-- Returns 1 when moved, 0 when the letter is no longer there, -1 when the
-- entries set aside are a list (an import of a list queue is under way:
-- it must finish first).
local aside_type = redis.call('TYPE', K.scrapy_queue).ok
if aside_type ~= 'none' and aside_type ~= 'zset' then
  return -1
end
if redis.call('LREM', K.dead, 1, A.letter) == 0 then
  return 0
end
redis.call('ZADD', K.scrapy_queue, 0, A.entry)
return 1
