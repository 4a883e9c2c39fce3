-- Push start entries, optionally only while the start key holds fewer than
-- ARGV[2] entries (back-pressure for task producers).
--
-- KEYS: 1 start key
-- ARGV: 1 start key type (list|set|zset), 2 limit (-1 for none), 3 zset
--       score, 4 wake channel, then the entries.
-- Returns how many entries were pushed (the rest were left over).
local kind, limit, score = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local function size()
  if kind == 'list' then return redis.call('LLEN', KEYS[1])
  elseif kind == 'set' then return redis.call('SCARD', KEYS[1])
  else return redis.call('ZCARD', KEYS[1]) end
end
local pushed = 0
for i = 5, #ARGV do
  if limit >= 0 and size() >= limit then
    break
  end
  if kind == 'list' then
    redis.call('RPUSH', KEYS[1], ARGV[i])
  elseif kind == 'set' then
    redis.call('SADD', KEYS[1], ARGV[i])
  else
    redis.call('ZADD', KEYS[1], score, ARGV[i])
  end
  pushed = pushed + 1
end
if pushed > 0 then
  redis.call('PUBLISH', ARGV[4], pushed)
end
return pushed
