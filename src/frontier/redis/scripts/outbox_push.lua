-- Hands requests to another shard of a sharded spider: pushes the OUTBOX
-- records after the head arguments to this shard's outbox for it
-- (K.outbox; see lib/outbox.lua). A commit or a claim does the same
-- inside its own call for the requests it finds for other shards.
--
-- Keys, arguments and records: `outbox_push` in protocol.rs. Returns how
-- many entries were pushed.
local n = (#ARGV - REST + 1) / OUTBOX.SIZE
if n < 1 then
  return 0
end
need(K.outbox, 'list', 'outbox')
outbox_push(K.outbox, REST, n, {size = OUTBOX.SIZE, token = OUTBOX.token, fingerprint = OUTBOX.fingerprint,
                                priority = OUTBOX.priority, json = OUTBOX.json})
return n
