-- Move failed requests back into the queue (`push-urls --from-failed`):
-- each entry leaves the failed list only in the step that enqueues its
-- request, which skips the dupefilter (its fingerprint was recorded when it
-- was first queued).
--
-- Keys, arguments and REQUEUE records: `requeue_failed` in protocol.rs.
-- Returns how many were re-queued.
local n = 0
local next_seq = seq_block(K.sequence, (#ARGV - REST + 1) / REQUEUE.SIZE)
for i = REST, #ARGV, REQUEUE.SIZE do
  if redis.call('LREM', K.failed, 1, ARGV[i + REQUEUE.entry]) > 0 then
    enqueue(K.requests, K.request_data, nil, next_seq, '', ARGV[i + REQUEUE.priority], ARGV[i + REQUEUE.json], 0)
    n = n + 1
  end
end
if n > 0 then
  redis.call('HINCRBY', K.stats, STAT.FAILED_REQUEUED_COUNT, n)
  redis.call('PUBLISH', A.wake, n)
end
return n
