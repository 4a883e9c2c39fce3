-- The second step of moving part of a sharded spider's page limit (see
-- quota_give.lua), on the target shard: adds A.amount to this shard's
-- cap, unless the move's token is in this shard's inbox (it took this
-- move before: a mover that died before saying so, finished again), and
-- remembers the token there (forgotten after INBOX_KEEP_MS, see
-- lib/outbox.lua). The idle workers are woken to lease what the
-- raised cap lets through.
--
-- Keys and arguments: `quota_take` in protocol.rs.
-- Returns 1 when it added the amount, 0 when it had taken it before.
if redis.call('ZSCORE', K.inbox, A.token) then
  return 0
end
local cap = page_cap(K, tonumber(A.max_pages), A.quota_shard) or tonumber(redis.call('HGET', K.control, 'quota_cap') or '0')
redis.call('HSET', K.control, 'quota_cap', cap + tonumber(A.amount))
local now = now_ms()
redis.call('ZADD', K.inbox, int(now), A.token)
forget_old_tokens(K.inbox, now)
redis.call('PUBLISH', A.wake, A.amount)
return 1
