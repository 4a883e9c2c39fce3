-- Delete a spider's keys in one step (`crawlworker flush`), returning how
-- many entries each held.
--
-- KEYS: the keys to delete
-- Returns {entries of KEYS[1], entries of KEYS[2], ...}.
local counts = {}
for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key).ok
  local n = 0
  if kind == 'list' then
    n = redis.call('LLEN', key)
  elseif kind == 'set' then
    n = redis.call('SCARD', key)
  elseif kind == 'zset' then
    n = redis.call('ZCARD', key)
  elseif kind == 'hash' then
    n = redis.call('HLEN', key)
  elseif kind == 'stream' then
    n = redis.call('XLEN', key)
  elseif kind == 'string' then
    n = 1
  end
  redis.call('DEL', key)
  counts[i] = n
end
return counts
