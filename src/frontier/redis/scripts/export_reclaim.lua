-- Take back the items of exporter A.exporter if it is gone (its lease
-- ran out, on the Redis clock): its list (K.exporting) goes back to the
-- head of the items list, in its order, in this one step, and its lease
-- says since when it is `lost` (so an exporter that was only frozen
-- acknowledges none of them: see export_ack). A lease lost more than
-- A.forget_ms ago is forgotten.
--
-- Keys and arguments: `export_reclaim` in protocol.rs.
-- Returns the number of items taken back.
local raw = redis.call('HGET', K.exporters, A.exporter)
if not raw then
  return 0
end
local now = now_ms()
local lease = cjson.decode(raw)
if lease.lost_ms then
  if tonumber(lease.lost_ms) < now - tonumber(A.forget_ms) then
    redis.call('HDEL', K.exporters, A.exporter)
  end
  return 0
end
if tonumber(lease.until_ms or 0) > now then
  return 0
end
local n = 0
while redis.call('LMOVE', K.exporting, K.items, 'RIGHT', 'LEFT') do
  n = n + 1
end
redis.call('HSET', K.exporters, A.exporter, cjson.encode({lost_ms = now}))
count(STAT.EXPORT_TAKEN_BACK_COUNT, n)
flush_tally(K.stats)
return n
