-- The last step of moving an outbox (see lib/outbox.lua): removes the
-- first A.count entries, the ones mover A.mover read and delivered, and
-- lets its lock go, only while the lock is still A.mover's. Only the lock
-- holder trims and pushes only append, so those entries are still the
-- outbox's first. A mover whose lock ran out trims nothing: the next
-- mover delivers its entries again, and the target skips them.
--
-- Keys and arguments: `outbox_trim` in protocol.rs. Returns 1 if trimmed,
-- 0 if the lock was not the mover's.
local holder = prove_by('string', 'outbox_lock', 'GET', K.outbox_lock)
if holder ~= A.mover then
  return 0
end
need(K.outbox, 'list', 'outbox')
redis.call('LTRIM', K.outbox, tonumber(A.count), -1)
redis.call('DEL', K.outbox_lock)
return 1
