-- Before a worker deduplicates: record the dupefilter's mode (and a Bloom
-- filter's size) when it is made, and say which mode and size it was made
-- with when it exists, so a spider whose mode changed is refused rather
-- than mixing two layouts.
--
-- KEYS: 1 dupefilter, 2 dupefilter meta
-- ARGV: 1 the spider's dupefilter spec
-- Returns {mode the filter has, its spec} ({'', ''} when no filter exists
-- and nothing was recorded: cannot happen).
local d = dupe_config(ARGV[1], KEYS[1], KEYS[2])
local mode = redis.call('HGET', KEYS[2], 'mode')
if not mode then
  -- A SET left by scrapy-redis (or an older crawlworker) is exact.
  local kind = redis.call('TYPE', KEYS[1]).ok
  if kind == 'set' then
    mode = 'exact'
    redis.call('HSET', KEYS[2], 'mode', mode, 'spec', 'exact')
  elseif kind == 'none' then
    redis.call('HSET', KEYS[2], 'mode', d.mode, 'spec', ARGV[1])
    mode = d.mode
  else
    return {kind, ''}
  end
end
return {mode, redis.call('HGET', KEYS[2], 'spec') or ''}
