-- Renew exporter A.exporter's lease for A.lease_ms, keeping when its
-- oldest unacknowledged item was taken. An exporter found gone (its items
-- were taken back) is told so, unless it starts afresh (A.fresh = '1').
--
-- Keys and arguments: `export_beat` in protocol.rs.
-- Returns 1 when renewed, 0 when the exporter was found gone.
local raw = redis.call('HGET', K.exporters, A.exporter)
local lease = raw and cjson.decode(raw) or {}
if A.fresh ~= '1' and not lease.until_ms then
  return 0
end
redis.call('HSET', K.exporters, A.exporter, cjson.encode({
  until_ms = now_ms() + tonumber(A.lease_ms), since_ms = tonumber(lease.since_ms) or 0}))
return 1
