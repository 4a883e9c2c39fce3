-- Hand worker A.worker's leases on the ids after the head arguments back
-- to the queue, at their old place (a worker shutting down, or one that
-- could not start them: paused, or holding over its fair share while
-- its peers wait). A request counted against its host's page quota
-- (max_pages_per_host) when it was leased is counted again when it is
-- leased again, so its count is given back here. The workers waiting for
-- work are woken, as many as the requests can use (hand_waiting): they
-- lease them.
--
-- Keys and arguments: `release` in protocol.rs.
-- Returns how many were handed back.
-- Every key before any write: a failing ZADD would lose the lease.
need(K.requests, 'zset', 'requests')
need(K.inflight, 'zset', 'inflight')
need(K.leases, 'hash', 'leases')
need(K.request_data, 'hash', 'request_data')
need(K.host_pages, 'hash', 'host_pages')
need(K.waiting, 'hash', 'waiting')
local worker = A.worker
local n = 0
for i = REST, #ARGV do
  local id = ARGV[i]
  local owner = redis.call('HGET', K.leases, id)
  if owned_by(owner, worker) then
    redis.call('ZREM', K.inflight, id)
    redis.call('HDEL', K.leases, id)
    redis.call('ZADD', K.requests, owner_score(owner), id)
    n = n + 1
    local host = host_of(redis.call('HGET', K.request_data, id) or '')
    if host then
      local pages = host_get(K.host_pages, host)
      if pages > 0 then
        host_set(K.host_pages, host, pages - 1)
      end
    end
  end
end
flush_hosts()
hand_waiting(K, A.wake, n, math.huge, worker)
return n
