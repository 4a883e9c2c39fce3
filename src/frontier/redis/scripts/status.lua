-- One consistent look at a crawl's queues, for `stats` and for
-- `--until-drained` (a crawl is finished only when start entries, queued,
-- in-flight and delayed retries are all zero at the same instant, in this
-- spider and in every spider that hands it work).
--
-- Keys and arguments: `status` in protocol.rs. After the head arguments
-- come the spiders upstream of this one that the caller knows of (see
-- src/frontier/pipeline.rs): a CHAIN record each (its start key's type),
-- with its keys in K.chain, CHAIN_KEY.SIZE per upstream in CHAIN_KEY's
-- order.
-- Returns {start, queued, inflight, dead, failed, dupefilter, items, delayed,
-- scheduled, overdue, paused (0/1), max_pages reached (0/1), item backlog
-- full (0/1), this spider's upstreams hash (name, record, ...), the tasks
-- sharded upstreams' movers delivered to it (handoff_deliver.lua)}, then for
-- each upstream passed {start, queued, inflight, delayed, paused (0/1),
-- max_pages reached (0/1), live workers, its upstreams hash}: scheduled
-- pages are those waiting for their time and those queued; overdue are
-- those whose time has passed (queued, or not yet moved to the queue
-- because no worker has leased since). An upstream's live workers are
-- those whose heartbeat is at most A.live_ms old.
local d = dupe_config(redis.call('HGET', K.dupefilter_meta, 'spec') or A.dupe_spec, K.dupefilter, K.dupefilter_meta)
local mode = redis.call('HGET', K.dupefilter_meta, 'mode') or d.mode
local now = now_ms()
local out = {
  start_size(A.start_kind, K.start_urls),
  redis.call('ZCARD', K.requests),
  redis.call('ZCARD', K.inflight),
  redis.call('LLEN', K.dead),
  redis.call('LLEN', K.failed),
  dupe_entries(d, mode, now),
  redis.call(A.sink == 'stream' and 'XLEN' or 'LLEN', K.items),
  redis.call('ZCARD', K.delayed),
  redis.call('ZCARD', K.schedule) + redis.call('ZCARD', K.schedule_due),
  redis.call('ZCOUNT', K.schedule, '-inf', now) + redis.call('ZCARD', K.schedule_due),
  redis.call('HEXISTS', K.control, 'paused'),
  redis.call('HEXISTS', K.control, 'max_pages_reached'),
  redis.call('HEXISTS', K.control, 'items_backlog_full'),
  redis.call('HGETALL', K.upstreams),
  tonumber(redis.call('HGET', K.control, 'handoffs_in') or '0'),
}
local since = now - tonumber(A.live_ms)
local first = 1
local offsets = {start_urls = CHAIN_KEY.start_urls, requests = CHAIN_KEY.requests, inflight = CHAIN_KEY.inflight,
                 delayed = CHAIN_KEY.delayed, control = CHAIN_KEY.control, upstreams = CHAIN_KEY.upstreams,
                 workers = CHAIN_KEY.workers}
for at = REST, #ARGV, CHAIN.SIZE do
  out[#out + 1] = upstream_sizes(ARGV[at + CHAIN.start_kind], function(field)
    return K.chain[first + offsets[field]]
  end, since)
  first = first + CHAIN_KEY.SIZE
end
return out
