-- Take the cluster-wide right to fetch host A.host's robots.txt for
-- A.ttl_ms, unless another worker holds it. One key holds every host's
-- lock (host -> until when, ms of the Redis clock), so a spider's locks are
-- flushed with the spider.
--
-- Keys and arguments: `robots_lock` in protocol.rs.
-- Returns 1 when taken, 0 when another worker holds it.
local now = now_ms()
local held_until = tonumber(redis.call('ZSCORE', K.robots_locks, A.host) or '0')
if held_until > now then
  return 0
end
redis.call('ZADD', K.robots_locks, now + tonumber(A.ttl_ms), A.host)
return 1
