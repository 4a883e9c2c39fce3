-- Queue the spider's seeds (`[start] sitemap` and `feed`) once per crawl:
-- a seed URL recorded in the seeds hash is not queued again (every worker
-- starting tries; one queues it). A seed's request skips the dupefilter.
--
-- KEYS: 1 seeds (hash URL -> ms queued), 2 requests, 3 request data,
--       4 sequence, 5 stats
-- ARGV: 1 wake channel, then pairs (URL, request JSON)
-- Returns how many were queued.
local now = now_ms()
local queued = 0
local next_seq = seq_block(KEYS[4], (#ARGV - 1) / 2)
for i = 2, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], now) == 1 then
    queued = queued + enqueue(KEYS[2], KEYS[3], nil, next_seq, '', 0, ARGV[i + 1], now)
  end
end
if queued > 0 then
  redis.call('HINCRBY', KEYS[5], STAT.SCHEDULER_ENQUEUED, queued)
  redis.call('PUBLISH', ARGV[1], queued)
end
return queued
