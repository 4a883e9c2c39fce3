-- Acknowledge what exporter A.exporter's store has committed, in one
-- step: the refused items' dead letters pushed, the items acknowledged
-- (list sink: its list deleted; stream sink: XACK of the entries it still
-- owns in group A.group), files to rename recorded (K.renames), the
-- stats counted, and its lease renewed for A.lease_ms.
--
-- Records after the head (ACK): `what` is 'ok' (an item the store
-- committed), 'dead' (one it refused: `value` is its dead letter) or
-- 'file' (`value` is the path of a file holding the items, to rename once
-- acknowledged); `id` is the stream entry's id ('' for the list sink).
--
-- An exporter whose items went to others (list sink: its list was moved
-- back; stream sink: another consumer claimed an entry) acknowledges
-- nothing of them: with A.whole = '1' (a file sink: the whole file or
-- nothing) nothing at all, else (an upserting store) the entries it
-- still owns.
--
-- Keys and arguments: `export_ack` in protocol.rs.
-- Returns {'acked', exported, refused} or {'lost'}.
local now = now_ms()
local stream = A.sink == 'stream'
local raw = redis.call('HGET', K.exporters, A.exporter)
local lease = raw and cjson.decode(raw) or {}
if not stream and not lease.until_ms then
  return {'lost'}
end
local owned, dead, ids, files = {}, {}, {}, {}
local exported, lost = 0, false
for i = REST, #ARGV, ACK.SIZE do
  local what, id, value = ARGV[i + ACK.what], ARGV[i + ACK.id], ARGV[i + ACK.value]
  if what == 'file' then
    files[#files + 1] = value
  else
    local mine = true
    if stream then
      mine = #redis.call('XPENDING', K.item_stream, A.group, id, id, 1, A.exporter) > 0
    end
    if not mine then
      lost = true
    elseif what == 'dead' then
      dead[#dead + 1] = value
      ids[#ids + 1] = id
    else
      exported = exported + 1
      ids[#ids + 1] = id
    end
  end
end
if lost and A.whole == '1' then
  return {'lost'}
end
if #dead > 0 then
  call_many('RPUSH', K.items_dead, dead)
end
if stream then
  if #ids > 0 then
    for first = 1, #ids, 1000 do
      redis.call('XACK', K.item_stream, A.group, unpack(ids, first, math.min(first + 999, #ids)))
    end
  end
else
  redis.call('DEL', K.exporting)
end
for _, path in ipairs(files) do
  redis.call('HSET', K.renames, path, A.exporter)
end
count(STAT.EXPORT_ITEM_COUNT, exported)
count(STAT.EXPORT_REFUSED_COUNT, #dead)
flush_tally(K.stats)
redis.call('HSET', K.exporters, A.exporter,
  cjson.encode({until_ms = now + tonumber(A.lease_ms), since_ms = 0}))
if lost then
  return {'lost'}
end
return {'acked', exported, #dead}
