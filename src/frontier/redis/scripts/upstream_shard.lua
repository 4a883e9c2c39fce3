-- One shard of a sharded spider that hands work to the spider whose
-- status is read (see src/frontier/redis/upstreams.rs), in one step: its
-- sizes as status.lua reads an upstream's (upstream_sizes; with A.whole
-- unset, not shard 0, no start entries, upstreams or workers: those keys
-- are shard 0's, and the caller names keys of this shard's slot in their
-- places), its request sequence, and what waits in its outboxes
-- (K.outboxes: for the other shards, and its hand-off outbox for the
-- spider reading).
--
-- Keys and arguments: `upstream_shard` in protocol.rs. Returns {sizes,
-- sequence, entries in the outboxes}.
local offsets = {start_urls = K.start_urls, requests = K.requests, inflight = K.inflight, delayed = K.delayed,
                 control = K.control, upstreams = K.upstreams, workers = K.workers}
local sizes
if A.whole == '1' then
  local since = now_ms() - tonumber(A.live_ms)
  sizes = upstream_sizes(A.start_kind, function(field)
    return offsets[field]
  end, since)
else
  sizes = {0, redis.call('ZCARD', K.requests), redis.call('ZCARD', K.inflight), redis.call('ZCARD', K.delayed),
           redis.call('HEXISTS', K.control, 'paused'), redis.call('HEXISTS', K.control, 'max_pages_reached'), 0, {}}
end
local waiting = 0
for _, outbox in ipairs(K.outboxes) do
  waiting = waiting + redis.call('LLEN', outbox)
end
return {sizes, tonumber(redis.call('GET', K.sequence) or '0'), waiting}
