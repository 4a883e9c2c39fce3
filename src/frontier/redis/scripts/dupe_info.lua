-- What `stats` shows of the dupefilter: its mode, how many entries it holds
-- and how many bytes Redis spends on it (MEMORY USAGE of every key it
-- uses), and for a Bloom filter its number of filters and the capacity and
-- entries of the newest (the one that takes new entries).
--
-- KEYS: 1 dupefilter, 2 dupefilter meta
-- ARGV: 1 dupefilter spec
-- Returns {mode, entries, bytes, capacity of the newest filter (0 if none),
-- filters, entries in the newest filter}.
-- The spec the filter was made with wins over the spider's.
local d = dupe_config(redis.call('HGET', KEYS[2], 'spec') or ARGV[1], KEYS[1], KEYS[2])
local mode = redis.call('HGET', KEYS[2], 'mode') or d.mode
local keys = {KEYS[1], KEYS[2]}
for _, k in ipairs(dupe_extra_keys(KEYS[1], KEYS[2])) do
  keys[#keys + 1] = k
end
local bytes = 0
for _, k in ipairs(keys) do
  bytes = bytes + (redis.call('MEMORY', 'USAGE', k, 'SAMPLES', 0) or 0)
end
local capacity, filters, newest = 0, 1, 0
if mode == 'bloom' then
  filters = tonumber(redis.call('HGET', KEYS[2], 'filters') or '1')
  capacity = bloom_plan(d, filters).c or 0
  newest = tonumber(redis.call('HGET', KEYS[2], 'count:' .. filters) or '0')
end
return {mode, dupe_entries(d, mode, now_ms()), bytes, capacity, filters, newest}
