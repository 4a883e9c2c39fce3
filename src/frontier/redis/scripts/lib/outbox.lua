-- Outboxes: how a sharded spider's shards hand requests to each other
-- (docs/scaling.md, "Hand-offs between shards"). A request that belongs
-- to another shard goes to this shard's outbox for it, a list in this
-- shard's slot, as one entry: "<token>|<fingerprint>|<priority>|<json>".
-- A request with a fingerprint needs no token: a second delivery of it
-- (by a mover that took over from one that died) is filtered by its
-- shard's dupefilter. One without (dont_filter) has a token no other
-- hand-off has, made by the worker that handed it on, and its shard
-- remembers the tokens it queued (its inbox) to skip a second delivery.
-- Nothing here depends on this shard's counters, so a failover that
-- loses this shard's last writes cannot make a new entry look like one
-- delivered before.

-- How long a shard's inbox remembers a token it took (a delivery, or a
-- move of its cap of max_pages): far longer than any mover's retry.
local INBOX_KEEP_MS = 24 * 3600 * 1000

-- Forgets the tokens `inbox` took more than INBOX_KEEP_MS before `now`.
local function forget_old_tokens(inbox, now)
  redis.call('ZREMRANGEBYSCORE', inbox, '-inf', int(now - INBOX_KEEP_MS))
end

-- Pushes the `n` records from ARGV[at] on to `outbox`; `r` gives the
-- record's size and the offsets of its token, fingerprint (none: '' for
-- every record), priority and request JSON.
local function outbox_push(outbox, at, n, r)
  local entries = {}
  for i = at, at + r.size * (n - 1), r.size do
    local fp = r.fingerprint and ARGV[i + r.fingerprint] or ''
    entries[#entries + 1] = ARGV[i + r.token] .. '|' .. fp .. '|' ..
                                int(num(ARGV[i + r.priority])) .. '|' .. ARGV[i + r.json]
  end
  call_many('RPUSH', outbox, entries)
end

-- The outbox entries a mover passed as ARGV[first] on, as records in one
-- flat list {token, fingerprint, priority, json, …} (OUTBOX_RECORD gives
-- their offsets), with their count, and the entries that do not parse
-- (not written by crawlworker), for the caller to set aside.
local OUTBOX_RECORD = {size = 4, token = 0, fingerprint = 1, priority = 2, json = 3}
local function outbox_read(first)
  local entries = {}
  for r = first, #ARGV do
    entries[#entries + 1] = ARGV[r]
  end
  local flat, n, bad = {}, 0, {}
  for _, entry in ipairs(entries) do
    local token, fp, priority, json = string.match(entry, '^([^|]*)|([^|]*)|(-?%d+)|(.*)$')
    if not token then
      bad[#bad + 1] = entry
    else
      flat[#flat + 1] = token
      flat[#flat + 1] = fp
      flat[#flat + 1] = priority
      flat[#flat + 1] = json
      n = n + 1
    end
  end
  return flat, n, bad
end

-- The tokens of the records in `flat` (see outbox_read) that `inbox` (a
-- zset of tokens taken) holds, as a set: a read that proves the inbox.
local function tokens_taken(inbox, flat)
  local R = OUTBOX_RECORD
  local tokens = {}
  for i = 1, #flat, R.size do
    if flat[i + R.token] ~= '' then
      tokens[#tokens + 1] = flat[i + R.token]
    end
  end
  local taken = {}
  for first = 1, #tokens, 1000 do
    local scores = prove_by('zset', 'inbox', 'ZMSCORE', inbox, unpack(tokens, first, math.min(first + 999, #tokens)))
    for i = 1, #scores do
      if scores[i] then
        taken[tokens[first + i - 1]] = true
      end
    end
  end
  return taken
end
