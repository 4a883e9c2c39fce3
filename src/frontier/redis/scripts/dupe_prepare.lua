-- Before a worker deduplicates: record the dupefilter's mode (and a Bloom
-- filter's size) when it is made, and say which mode and size it was made
-- with when it exists, so a spider whose mode changed is refused rather
-- than mixing two layouts.
--
-- Keys and arguments: `dupe_prepare` in protocol.rs.
-- Returns {mode the filter has, its spec} ({'', ''} when no filter exists
-- and nothing was recorded: cannot happen).
local meta = K.dupefilter_meta
local d = dupe_config(A.dupe_spec, K.dupefilter, meta)
local mode = redis.call('HGET', meta, 'mode')
if not mode then
  -- A SET left by scrapy-redis (or an older crawlworker) is exact.
  local kind = redis.call('TYPE', K.dupefilter).ok
  if kind == 'set' then
    mode = 'exact'
    redis.call('HSET', meta, 'mode', mode, 'spec', 'exact')
  elseif kind == 'none' then
    redis.call('HSET', meta, 'mode', d.mode, 'spec', A.dupe_spec)
    mode = d.mode
  else
    return {kind, ''}
  end
end
return {mode, redis.call('HGET', meta, 'spec') or ''}
