-- The first step of moving an outbox (see lib/outbox.lua): takes its
-- mover lock (K.outbox_lock) for A.mover, a token no other mover has,
-- for A.lock_ms, unless another mover holds it; reads the first A.max
-- entries. The mover then delivers them to their shard (outbox_deliver)
-- and trims them (outbox_trim), while the lock is still its own.
--
-- Keys and arguments: `outbox_take` in protocol.rs. Returns the entries,
-- or {} when another mover holds the lock or the outbox is empty (the
-- lock is not taken then).
local holder = prove_by('string', 'outbox_lock', 'GET', K.outbox_lock)
if holder and holder ~= A.mover then
  return {}
end
local entries = prove_by('list', 'outbox', 'LRANGE', K.outbox, 0, tonumber(A.max) - 1)
if #entries == 0 then
  return {}
end
redis.call('SET', K.outbox_lock, A.mover, 'PX', A.lock_ms)
return entries
