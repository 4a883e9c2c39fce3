-- What `stats` shows of the dupefilter: its mode, how many entries it holds
-- and how many bytes Redis spends on it (MEMORY USAGE of every key it
-- uses), and for a Bloom filter its number of filters and the capacity and
-- entries of the newest (the one that takes new entries).
--
-- Keys and arguments: `dupe_info` in protocol.rs.
-- Returns {mode, entries, bytes, capacity of the newest filter (0 if none),
-- filters, entries in the newest filter}.
-- The spec the filter was made with wins over the spider's.
local meta = K.dupefilter_meta
local d = dupe_config(redis.call('HGET', meta, 'spec') or A.dupe_spec, K.dupefilter, meta)
local mode = redis.call('HGET', meta, 'mode') or d.mode
local keys = {K.dupefilter, meta}
for _, k in ipairs(dupe_extra_keys(K.dupefilter, meta)) do
  keys[#keys + 1] = k
end
local bytes = 0
for _, k in ipairs(keys) do
  bytes = bytes + (redis.call('MEMORY', 'USAGE', k, 'SAMPLES', 0) or 0)
end
local capacity, filters, newest = 0, 1, 0
if mode == 'bloom' then
  filters = tonumber(redis.call('HGET', meta, 'filters') or '1')
  capacity = bloom_plan(d, filters).c or 0
  newest = tonumber(redis.call('HGET', meta, 'count:' .. filters) or '0')
end
return {mode, dupe_entries(d, mode, now_ms()), bytes, capacity, filters, newest}
