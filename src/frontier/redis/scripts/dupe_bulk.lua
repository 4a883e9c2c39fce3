-- Many fingerprints at once, in the dupefilter's own mode: `add` records
-- them (as a page's commit does), `check` looks them up and changes
-- nothing, `forget` removes them (`flush --fingerprint URL`; a Bloom filter
-- cannot forget one entry).
--
-- Keys and arguments: `dupe_bulk` in protocol.rs; the fingerprints follow
-- the head arguments.
-- Returns how many were new (add), seen (check) or removed (forget); -1
-- for `forget` on a Bloom filter.
-- The spec the filter was made with wins over the spider's.
local d = dupe_config(redis.call('HGET', K.dupefilter_meta, 'spec') or A.dupe_spec, K.dupefilter, K.dupefilter_meta)
local op = A.op
if op == 'forget' and d.mode == 'bloom' then
  return -1
end
local now = now_ms()
local n = 0
for i = REST, #ARGV do
  local hit
  if op == 'add' then
    hit = dupe_add(d, ARGV[i], now)
  elseif op == 'check' then
    hit = dupe_lookup(d, ARGV[i], now)
  elseif op == 'forget' then
    hit = dupe_forget(d, ARGV[i], now)
  else
    return redis.error_reply('unknown dupefilter operation ' .. tostring(op))
  end
  if hit then
    n = n + 1
  end
end
return n
