-- Move failed requests back into the queue (`push-urls --from-failed`):
-- each entry leaves the failed list only in the step that enqueues its
-- request, which skips the dupefilter (its fingerprint was recorded when it
-- was first queued).
--
-- KEYS: 1 failed, 2 requests, 3 request data, 4 dupefilter, 5 sequence,
--       6 stats
-- ARGV: 1 wake channel, then per entry: the failed entry as read, the
--       request's priority, the request JSON.
-- Returns how many were re-queued.
local n = 0
local next_seq = seq_block(KEYS[5], (#ARGV - 1) / 3)
for i = 2, #ARGV, 3 do
  if redis.call('LREM', KEYS[1], 1, ARGV[i]) > 0 then
    enqueue(KEYS[2], KEYS[3], nil, next_seq, '', ARGV[i + 1], ARGV[i + 2], 0)
    n = n + 1
  end
end
if n > 0 then
  redis.call('HINCRBY', KEYS[6], STAT.FAILED_REQUEUED_COUNT, n)
  redis.call('PUBLISH', ARGV[1], n)
end
return n
