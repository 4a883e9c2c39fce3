-- Push start entries, optionally only while the start key holds fewer than
-- A.limit entries (back-pressure for task producers).
--
-- Keys and arguments: `push_start` in protocol.rs; the entries follow the
-- head arguments.
-- Returns how many entries were pushed (the rest were left over).
local kind, limit, score = A.start_kind, tonumber(A.limit), A.score
local key = K.start_urls
local function size()
  if kind == 'list' then return redis.call('LLEN', key)
  elseif kind == 'set' then return redis.call('SCARD', key)
  else return redis.call('ZCARD', key) end
end
local pushed = 0
for i = REST, #ARGV do
  if limit >= 0 and size() >= limit then
    break
  end
  if kind == 'list' then
    redis.call('RPUSH', key, ARGV[i])
  elseif kind == 'set' then
    redis.call('SADD', key, ARGV[i])
  else
    redis.call('ZADD', key, score, ARGV[i])
  end
  pushed = pushed + 1
end
if pushed > 0 then
  redis.call('PUBLISH', A.wake, pushed)
end
return pushed
