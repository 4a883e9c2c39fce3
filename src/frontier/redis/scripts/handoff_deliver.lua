-- Delivers the tasks a shard of a sharded spider handed to this spider
-- (`to_spider`; docs/scaling.md, "Hand-offs to another spider"): the
-- entries a mover took from the shard's hand-off outbox for it (VALUE
-- records, "<token>|<fingerprint>|<priority>|<task entry>", see
-- lib/outbox.lua), each pushed to this spider's start key (K.start, of
-- type A.start_kind) unless its token is in this spider's inbox: a mover
-- that died before trimming what it delivered pushes nothing twice. The
-- deliveries are counted in the control hash (`handoffs_in`), which a
-- reading of whether this spider is drained compares (see
-- frontier::pipeline), and wake this spider's waiting workers, as many
-- as the tasks can use. An entry crawlworker did not write goes to this
-- spider's dead letters, with the outbox (A.outbox) it came from.
--
-- Keys, arguments and records: `handoff_deliver` in protocol.rs. Returns
-- {pushed, skipped, unreadable}.
local flat, _, bad = outbox_read(REST)
local R = OUTBOX_RECORD
local kind = A.start_kind
-- The tokens this spider took before: those entries are skipped.
local seen = tokens_taken(K.inbox, flat)
need(K.start, kind, 'start_urls of a to_spider')
need(K.control, 'hash', 'control of a to_spider')
need(K.waiting, 'hash', 'waiting of a to_spider')
need(K.dead, 'list', 'dead of a to_spider')
need(K.stats, 'hash', 'stats of a to_spider')
local now = now_ms()
local pushed, skipped, remembered = 0, 0, {}
for i = 1, #flat, R.size do
  local token, entry = flat[i + R.token], flat[i + R.json]
  if seen[token] then
    skipped = skipped + 1
  else
    if kind == 'list' then
      redis.call('RPUSH', K.start, entry)
    elseif kind == 'set' then
      redis.call('SADD', K.start, entry)
    else
      redis.call('ZADD', K.start, flat[i + R.priority], entry)
    end
    pushed = pushed + 1
    if token ~= '' then
      seen[token] = true
      remembered[#remembered + 1] = int(now)
      remembered[#remembered + 1] = token
    end
  end
end
call_many('ZADD', K.inbox, remembered)
forget_old_tokens(K.inbox, now)
for _, entry in ipairs(bad) do
  redis.call('RPUSH', K.dead, cjson.encode({
    key = A.outbox, entry = escaped(string.sub(entry, 1, 1024)), bytes = #entry,
    reason = 'hand-off outbox entry not written by crawlworker (not <token>|<fingerprint>|<priority>|<task>)',
    time = now / 1000,
  }))
end
if #bad > 0 then
  redis.call('HINCRBY', K.stats, STAT.DEADLETTER_COUNT, #bad)
end
if pushed > 0 then
  redis.call('HINCRBY', K.control, 'handoffs_in', pushed)
  hand_waiting({waiting = K.waiting}, A.wake, pushed, math.huge)
end
return {pushed, skipped, #bad}
