-- Outboxes: how a sharded spider's shards hand requests to each other
-- (docs/scaling.md, "Hand-offs between shards"). A request that belongs
-- to another shard goes to this shard's outbox for it, a list in this
-- shard's slot, as one entry: "<number>|<fingerprint>|<priority>|<json>".
-- The numbers come from this shard's sequence, so an outbox is in number
-- order (its entries are pushed by this shard's scripts, one call at a
-- time). The target records the last number it took from each source (its
-- inbox), which makes a delivery repeated by a second mover a no-op.

-- Pushes the `n` LINK records from ARGV[at] on (see queue_links) to
-- `outbox`, numbered by `next_seq` (see seq_block).
local function outbox_push(outbox, at, n, link, next_seq)
  local entries = {}
  for r = at, at + link.size * (n - 1), link.size do
    entries[#entries + 1] = int(next_seq()) .. '|' .. ARGV[r + link.fingerprint] .. '|' ..
                                int(num(ARGV[r + link.priority])) .. '|' .. ARGV[r + link.json]
  end
  call_many('RPUSH', outbox, entries)
end

-- The outbox `entries` numbered above `after`, as LINK-shaped records in
-- one flat list {fingerprint, priority, json, …} (OUTBOX_RECORD gives their
-- offsets), with their count and the highest number read (at least
-- `after`), and the entries that do not parse (not written by
-- crawlworker), for the caller to set aside.
local OUTBOX_RECORD = {size = 3, fingerprint = 0, priority = 1, json = 2}
local function outbox_read(entries, after)
  local flat, n, last, bad = {}, 0, after, {}
  for _, entry in ipairs(entries) do
    local number, fp, priority, json = string.match(entry, '^(%d+)|([^|]*)|(-?%d+)|(.*)$')
    number = tonumber(number)
    if not number then
      bad[#bad + 1] = entry
    elseif number > after then
      flat[#flat + 1] = fp
      flat[#flat + 1] = priority
      flat[#flat + 1] = json
      n = n + 1
      last = math.max(last, number)
    end
  end
  return flat, n, last, bad
end
