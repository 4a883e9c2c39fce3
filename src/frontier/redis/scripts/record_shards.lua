-- Record a sharded spider's shard count in shard 0's control hash, once
-- per crawl (docs/scaling.md, "One spider over N nodes"). A crawl that
-- began without shards keeps its requests, leases, retries, revisits and
-- fingerprints in shard 0's keys, where a sharded spider would look for
-- only shard 0's hosts: the count is not recorded over them.
--
-- A.mode:
--   join      a worker starting: records the count unless shard 0 holds
--             any of an unsharded crawl's requests or fingerprints;
--   probe     `import-queue` before it spreads the fingerprints: records
--             nothing, and names only what no import can take over (a
--             crawlworker crawl's requests, leases, retries, revisits);
--   takeover  `import-queue` once they are spread: the same check as
--             probe, then records the count.
--
-- Keys and arguments: `record_shards` in protocol.rs.
-- Returns {the recorded count (0: none), the first key in the way ('')}.
local recorded = redis.call('HGET', K.control, 'shards')
if recorded then
  return {tonumber(recorded), ''}
end
local in_the_way = {K.request_data, K.inflight, K.delayed, K.schedule}
if A.mode == 'join' then
  in_the_way = {K.requests, K.scrapy_queue, K.inflight, K.delayed, K.schedule, K.dupefilter}
end
for _, key in ipairs(in_the_way) do
  if redis.call('EXISTS', key) == 1 then
    return {0, key}
  end
end
if A.mode == 'probe' then
  return {0, ''}
end
redis.call('HSET', K.control, 'shards', A.shards)
return {tonumber(A.shards), ''}
