-- The second step of moving an outbox (see lib/outbox.lua), on the
-- target shard: queues the entries of shard A.source's outbox (VALUE
-- records) numbered above the last this shard took from it (K.inbox),
-- through this shard's dupefilter, records the highest number, and wakes
-- the workers waiting for work here. Entries delivered before (by a mover
-- that died before trimming them) are skipped, so a repeat queues
-- nothing twice, dont_filter requests included. An entry crawlworker did
-- not write goes to the dead letters, with the outbox (A.outbox) it came
-- from.
--
-- Keys, arguments and records: `outbox_deliver` in protocol.rs. Returns
-- {enqueued, filtered, skipped, unreadable}.
local after = tonumber(prove_by('hash', 'inbox', 'HGET', K.inbox, A.source) or '0')
local entries = {}
for r = REST, #ARGV do
  entries[#entries + 1] = ARGV[r]
end
local flat, n, last, bad = outbox_read(entries, after)
local skipped = #entries - n - #bad
if n == 0 and #bad == 0 then
  return {0, 0, skipped, 0}
end
local dupe = dupe_config(A.dupe_spec, K.dupefilter, K.dupefilter_meta)
local now = now_ms()
local fps = {}
for i = 1, #flat, OUTBOX_RECORD.size do
  if flat[i] ~= '' then
    fps[#fps + 1] = flat[i]
  end
end
local gate = link_gate(dupe, fps, now)
read_stats(K.stats, {STAT.SCHEDULER_ENQUEUED, STAT.DUPEFILTER_FILTERED, STAT.DEADLETTER_COUNT})
need(K.requests, 'zset', 'requests')
need(K.request_data, 'hash', 'request_data')
need(K.inflight, 'zset', 'inflight')
need(K.crew, 'zset', 'crew')
need(K.waiting, 'hash', 'waiting')
need(K.dead, 'list', 'dead')
need(K.inbox, 'hash', 'inbox')
need_dupe(dupe)

local next_seq = seq_block(K.sequence, n, true)
-- Set aside what does not parse (after the first write, which proves the
-- sequence), so the outbox can be trimmed past it.
for _, entry in ipairs(bad) do
  redis.call('RPUSH', K.dead, cjson.encode({
    key = A.outbox, entry = escaped(string.sub(entry, 1, 1024)), bytes = #entry,
    reason = 'outbox entry not written by crawlworker (not <number>|<fingerprint>|<priority>|<request>)',
    time = now / 1000,
  }))
end
count(STAT.DEADLETTER_COUNT, #bad)

local queue_args, data_args = {}, {}
local enqueued, filtered = queue_links(1, n, OUTBOX_RECORD, gate, next_seq, queue_args, data_args, flat)
gate.record()
call_many('ZADD', K.requests, queue_args)
call_many('HSET', K.request_data, data_args)
redis.call('HSET', K.inbox, A.source, int(last))
count(STAT.SCHEDULER_ENQUEUED, enqueued)
count(STAT.DUPEFILTER_FILTERED, filtered)
if enqueued > 0 then
  wake_waiting(K, A.wake, enqueued, fair_room(K, A.mover, 0, now))
end
flush_tally(K.stats)
return {enqueued, filtered, skipped, #bad}
