-- Move up to A.max items from the head of the items list to the tail of
-- exporter A.exporter's own list (K.exporting), in this one step, and
-- renew its lease for A.lease_ms. An item is always in one of the two
-- lists: a killed exporter's list is moved back by `export_reclaim`.
-- An exporter found gone (its list was moved back: its lease says `lost`,
-- or it has none) takes nothing until it starts afresh (A.fresh = '1'):
-- what it held went to others.
--
-- Keys and arguments: `export_take` in protocol.rs.
-- Returns {'lost'} or {'taken', item, …}.
local now = now_ms()
local raw = redis.call('HGET', K.exporters, A.exporter)
local lease = raw and cjson.decode(raw) or {}
if A.fresh ~= '1' and not lease.until_ms then
  return {'lost'}
end
local out = {'taken'}
for _ = 1, tonumber(A.max) do
  local item = redis.call('LMOVE', K.items, K.exporting, 'LEFT', 'RIGHT')
  if not item then
    break
  end
  out[#out + 1] = item
end
local since = tonumber(lease.since_ms) or 0
if since == 0 and #out > 1 then
  since = now
end
redis.call('HSET', K.exporters, A.exporter,
  cjson.encode({until_ms = now + tonumber(A.lease_ms), since_ms = since}))
return out
