-- Hand worker ARGV[1]'s leases on ids ARGV[2..] back to the queue, at their
-- old place (a worker shutting down, or one that could not start them). A
-- request counted against its host's page quota (max_pages_per_host) when
-- it was leased is counted again when it is leased again, so its count is
-- given back here.
--
-- KEYS: 1 requests, 2 in-flight, 3 lease owners, 4 request data,
--       5 pages leased per host
-- Returns how many were handed back.
-- Every key before any write: a failing ZADD would lose the lease.
need(KEYS[1], 'zset', 'requests')
need(KEYS[2], 'zset', 'inflight')
need(KEYS[3], 'hash', 'leases')
need(KEYS[4], 'hash', 'request_data')
need(KEYS[5], 'hash', 'host_pages')
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
    local host = host_of(redis.call('HGET', KEYS[4], id) or '')
    if host then
      local pages = host_get(KEYS[5], host)
      if pages > 0 then
        host_set(KEYS[5], host, pages - 1)
      end
    end
  end
end
flush_hosts()
return n
