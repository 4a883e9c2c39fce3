-- Many fingerprints at once, in the dupefilter's own mode: `add` records
-- them (as a page's commit does), `check` looks them up and changes
-- nothing, `forget` removes them (`flush --fingerprint URL`; a Bloom filter
-- cannot forget one entry).
--
-- KEYS: 1 dupefilter, 2 dupefilter meta
-- ARGV: 1 dupefilter spec, 2 `add`, `check` or `forget`, 3… fingerprints
-- Returns how many were new (add), seen (check) or removed (forget); -1
-- for `forget` on a Bloom filter.
-- The spec the filter was made with wins over the spider's.
local d = dupe_config(redis.call('HGET', KEYS[2], 'spec') or ARGV[1], KEYS[1], KEYS[2])
local op = ARGV[2]
if op == 'forget' and d.mode == 'bloom' then
  return -1
end
local now = now_ms()
local n = 0
for i = 3, #ARGV do
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
