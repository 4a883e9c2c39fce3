-- Take the cluster-wide right to fetch host ARGV[1]'s robots.txt for
-- ARGV[2] ms, unless another worker holds it. One key holds every host's
-- lock (host -> until when, ms of the Redis clock), so a spider's locks are
-- flushed with the spider.
--
-- KEYS: 1 robots locks (zset)
-- Returns 1 when taken, 0 when another worker holds it.
local now = now_ms()
local held_until = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
if held_until > now then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 1
