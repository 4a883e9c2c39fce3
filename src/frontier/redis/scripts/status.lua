-- One consistent look at a crawl's queues, for `stats` and for
-- `--until-drained` (a crawl is finished only when start entries, queued,
-- in-flight and delayed retries are all zero at the same instant).
--
-- Keys and arguments: `status` in protocol.rs.
-- Returns {start, queued, inflight, dead, failed, dupefilter, items, delayed,
-- scheduled, overdue, paused (0/1), max_pages reached (0/1), item backlog
-- full (0/1)}: scheduled pages are those waiting for their time and
-- those queued; overdue are those whose time has passed (queued, or not
-- yet moved to the queue because no worker has leased since).
local kind = A.start_kind
local d = dupe_config(redis.call('HGET', K.dupefilter_meta, 'spec') or A.dupe_spec, K.dupefilter, K.dupefilter_meta)
local mode = redis.call('HGET', K.dupefilter_meta, 'mode') or d.mode
local start
if kind == 'list' then
  start = redis.call('LLEN', K.start_urls)
elseif kind == 'set' then
  start = redis.call('SCARD', K.start_urls)
else
  start = redis.call('ZCARD', K.start_urls)
end
return {
  start,
  redis.call('ZCARD', K.requests),
  redis.call('ZCARD', K.inflight),
  redis.call('LLEN', K.dead),
  redis.call('LLEN', K.failed),
  dupe_entries(d, mode, now_ms()),
  redis.call(A.sink == 'stream' and 'XLEN' or 'LLEN', K.items),
  redis.call('ZCARD', K.delayed),
  redis.call('ZCARD', K.schedule) + redis.call('ZCARD', K.schedule_due),
  redis.call('ZCOUNT', K.schedule, '-inf', now_ms()) + redis.call('ZCARD', K.schedule_due),
  redis.call('HEXISTS', K.control, 'paused'),
  redis.call('HEXISTS', K.control, 'max_pages_reached'),
  redis.call('HEXISTS', K.control, 'items_backlog_full'),
}
