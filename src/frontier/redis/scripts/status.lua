-- One consistent look at a crawl's queues, for `stats` and for
-- `--until-drained` (a crawl is finished only when start entries, queued,
-- in-flight and delayed retries are all zero at the same instant).
--
-- KEYS: 1 start key, 2 requests, 3 in-flight, 4 dead letters, 5 failed,
--       6 dupefilter, 7 items, 8 delayed retries, 9 dupefilter meta,
--       10 revisit schedule, 11 revisits queued and not yet fetched,
--       12 crawl control
-- ARGV: 1 start key type, 2 dupefilter spec, 3 item sink ('list' or
--       'stream')
-- Returns {start, queued, inflight, dead, failed, dupefilter, items, delayed,
-- scheduled, overdue, paused (0/1), max_pages reached (0/1), item backlog
-- full (0/1)}: scheduled pages are those waiting for their time and
-- those queued; overdue are those whose time has passed (queued, or not
-- yet moved to the queue because no worker has leased since).
local kind = ARGV[1]
local d = dupe_config(redis.call('HGET', KEYS[9], 'spec') or ARGV[2], KEYS[6], KEYS[9])
local mode = redis.call('HGET', KEYS[9], 'mode') or d.mode
local start
if kind == 'list' then
  start = redis.call('LLEN', KEYS[1])
elseif kind == 'set' then
  start = redis.call('SCARD', KEYS[1])
else
  start = redis.call('ZCARD', KEYS[1])
end
return {
  start,
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  redis.call('LLEN', KEYS[4]),
  redis.call('LLEN', KEYS[5]),
  dupe_entries(d, mode, now_ms()),
  redis.call(ARGV[3] == 'stream' and 'XLEN' or 'LLEN', KEYS[7]),
  redis.call('ZCARD', KEYS[8]),
  redis.call('ZCARD', KEYS[10]) + redis.call('ZCARD', KEYS[11]),
  redis.call('ZCOUNT', KEYS[10], '-inf', now_ms()) + redis.call('ZCARD', KEYS[11]),
  redis.call('HEXISTS', KEYS[12], 'paused'),
  redis.call('HEXISTS', KEYS[12], 'max_pages_reached'),
  redis.call('HEXISTS', KEYS[12], 'items_backlog_full'),
}
