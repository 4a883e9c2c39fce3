-- Delete a spider's keys in one step (`crawlworker flush`), returning how
-- many entries each held. Deleting the dupefilter's meta hash also deletes
-- the keys it lists (a Bloom filter's followers, expiring time buckets).
--
-- Keys and arguments: `flush` in protocol.rs (the keys to delete are
-- K.targets).
-- Returns {key1, entries1, key2, entries2, ...}.
local keys = {}
for _, key in ipairs(K.targets) do
  if key == A.dupefilter_meta then
    for _, extra in ipairs(dupe_extra_keys(A.dupefilter, A.dupefilter_meta)) do
      keys[#keys + 1] = extra
    end
  end
  keys[#keys + 1] = key
end
local out = {}
for _, key in ipairs(keys) do
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
  out[#out + 1] = key
  out[#out + 1] = n
end
return out
