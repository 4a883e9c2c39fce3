-- Queue the spider's seeds (`[start] sitemap` and `feed`) once per crawl:
-- a seed URL recorded in the seeds hash is not queued again (every worker
-- starting tries; one queues it). A seed's request skips the dupefilter.
--
-- Keys, arguments and SEED records: `seed` in protocol.rs.
-- Returns how many were queued.
local now = now_ms()
local queued = 0
local next_seq = seq_block(K.sequence, (#ARGV - REST + 1) / SEED.SIZE)
for i = REST, #ARGV, SEED.SIZE do
  if redis.call('HSETNX', K.seeds, ARGV[i + SEED.url], now) == 1 then
    queued = queued + enqueue(K.requests, K.request_data, nil, next_seq, '', 0, ARGV[i + SEED.json], now)
  end
end
if queued > 0 then
  redis.call('HINCRBY', K.stats, STAT.SCHEDULER_ENQUEUED, queued)
  redis.call('PUBLISH', A.wake, queued)
end
return queued
