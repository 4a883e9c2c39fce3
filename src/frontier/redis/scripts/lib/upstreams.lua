-- What a downstream spider reads of a spider that hands it work (see
-- src/frontier/pipeline.rs): its sizes, for status.lua (the upstreams in
-- its slot) and upstream_shard.lua (a shard of a sharded upstream).

-- The size of start key `key` of type `kind`.
local function start_size(kind, key)
  if kind == 'list' then
    return redis.call('LLEN', key)
  elseif kind == 'set' then
    return redis.call('SCARD', key)
  end
  return redis.call('ZCARD', key)
end

-- The workers of workers hash `key` whose heartbeat is at `since` (ms) or
-- later.
local function live_workers(key, since)
  local n = 0
  for _, beat in ipairs(redis.call('HVALS', key)) do
    local at = json_number(beat, 'heartbeat')
    if at and at * 1000 >= since then
      n = n + 1
    end
  end
  return n
end

-- An upstream's {start, queued, inflight, delayed, paused (0/1),
-- max_pages reached (0/1), live workers, its upstreams hash}: `key(field)`
-- gives its key of each CHAIN_KEY field, `kind` its start key's type;
-- its live workers are those heard of since `since` (ms).
local function upstream_sizes(kind, key, since)
  return {
    start_size(kind, key('start_urls')),
    redis.call('ZCARD', key('requests')),
    redis.call('ZCARD', key('inflight')),
    redis.call('ZCARD', key('delayed')),
    redis.call('HEXISTS', key('control'), 'paused'),
    redis.call('HEXISTS', key('control'), 'max_pages_reached'),
    live_workers(key('workers'), since),
    redis.call('HGETALL', key('upstreams')),
  }
end
