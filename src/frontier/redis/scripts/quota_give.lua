-- The first step of moving part of a sharded spider's page limit from
-- this shard to shard A.to (docs/scaling.md, "max_pages over shards"):
-- gives at most A.want of the cap this shard cannot use now (its cap,
-- less the pages it counts, responses received and requests in flight,
-- less the requests queued here), and notes the move in the control hash
-- (quota_out:<to>:<token> = "<amount>|<ms>") until the target has taken
-- it (quota_take.lua) and the mover says so (HDEL). A move whose mover
-- died is finished by any worker from that note.
--
-- Keys and arguments: `quota_give` in protocol.rs.
-- Returns how much it gave (0: nothing to spare).
local cap = page_cap(K, tonumber(A.max_pages), A.quota_shard)
if not cap then
  return 0
end
local used = tonumber(redis.call('HGET', K.stats, STAT.RESPONSE_RECEIVED_COUNT) or '0')
  + redis.call('ZCARD', K.inflight)
local give = math.min(cap - used - redis.call('ZCARD', K.requests), tonumber(A.want))
if give <= 0 then
  return 0
end
redis.call('HSET', K.control, 'quota_cap', cap - give,
  'quota_out:' .. A.to .. ':' .. A.token, int(give) .. '|' .. int(now_ms()))
return give
