-- Hand worker ARGV[1]'s leases on ids ARGV[2..] back to the queue, at their
-- old place (a worker shutting down, or one that could not start them).
--
-- KEYS: 1 requests, 2 in-flight, 3 lease owners
-- Returns how many were handed back.
-- All three keys before any write: a failing ZADD would lose the lease.
need(KEYS[1], 'zset', 'requests')
need(KEYS[2], 'zset', 'inflight')
need(KEYS[3], 'hash', 'leases')
local worker = ARGV[1]
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local owner = redis.call('HGET', KEYS[3], id)
  if owned_by(owner, worker) then
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    redis.call('ZADD', KEYS[1], owner_score(owner), id)
    n = n + 1
  end
end
return n
