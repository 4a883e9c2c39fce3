-- Hands requests to another shard of a sharded spider: pushes the LINK
-- records after the head arguments to this shard's outbox for it
-- (K.outbox), each numbered from this shard's sequence (see
-- lib/outbox.lua). A commit or a claim does the same inside its own call
-- for the requests it finds for other shards.
--
-- Keys, arguments and records: `outbox_push` in protocol.rs. Returns how
-- many entries were pushed.
local n = (#ARGV - REST + 1) / LINK.SIZE
if n < 1 then
  return 0
end
local link = {size = LINK.SIZE, fingerprint = LINK.fingerprint, priority = LINK.priority, json = LINK.json}
need(K.outbox, 'list', 'outbox')
local next_seq = seq_block(K.sequence, n, true)
outbox_push(K.outbox, REST, n, link, next_seq)
return n
