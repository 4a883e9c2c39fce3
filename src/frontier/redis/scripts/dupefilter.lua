-- The dupefilter in its four modes (prepended to every script, before the
-- helpers of lib/). `src/frontier/dupefilter.rs` describes them and builds
-- the spec a script receives:
--
--   exact                          a SET of hex fingerprints (scrapy-redis's)
--   compact                        one HASH: field = the fingerprint's first
--                                  2 bytes, value = the other 18 bytes of
--                                  every fingerprint in that bucket, packed
--   bloom:<m>:<k>:<capacity>:<p>[;<m>:<k>:<capacity>:<p>…]
--                                  a chain of filters (<key>, <key>:2, …),
--                                  each of p bitmaps ("pieces": <filter>,
--                                  <filter>:piece:2, …) of m bits; an entry
--                                  sets k bits in the one piece its
--                                  fingerprint picks. A full filter
--                                  (capacity entries) is followed by the
--                                  next in the list (the last repeats).
--   expiring:<ttl>:<width>:<0|1>   SETs per time bucket of <width> ms
--                                  (<key>:<bucket>), each expiring <ttl> ms
--                                  after its end; 1 refreshes a hit entry
--
-- The meta hash (KEY dupefilter meta) records the mode a filter was made
-- with, and the counts and keys a mode needs: `entries` (compact),
-- `filters` and `count:<n>` (bloom), `bucket:<n>` → expiry (expiring).

local function dupe_config(spec, key, meta)
  local head, chain = string.match(spec, '^([^;]*);?(.*)$')
  local parts = {}
  for part in string.gmatch(head, '[^:]+') do
    parts[#parts + 1] = part
  end
  return {mode = parts[1], key = key, meta = meta, chain = chain,
          a = tonumber(parts[2]), b = tonumber(parts[3]), c = tonumber(parts[4]),
          pieces = tonumber(parts[5] or '1')}
end

-- A Bloom chain's filter `n`: its bits per piece (a), hashes (b),
-- capacity (c) and pieces. The first is the spec's head; the chain after
-- it is read when a later filter is needed (a spec without one repeats
-- the first).
local function bloom_plan(d, n)
  if n == 1 then
    return d
  end
  if not d.plans then
    d.plans = {}
    for plan in string.gmatch(d.chain or '', '[^;]+') do
      local a, b, c, pieces = string.match(plan, '^(%d+):(%d+):(%d+):(%d+)$')
      d.plans[#d.plans + 1] = {a = tonumber(a), b = tonumber(b), c = tonumber(c),
                               pieces = tonumber(pieces)}
    end
  end
  return d.plans[math.min(n - 1, #d.plans)] or d
end

local function hex_to_bin(hex)
  return (string.gsub(hex, '..', function(h) return string.char(tonumber(h, 16)) end))
end

-- Whether `rest` (18 bytes) is one of the 18-byte records packed in `v`.
local function packed_has(v, rest)
  local pos = 1
  while true do
    local i = string.find(v, rest, pos, true)
    if not i then
      return false
    end
    if (i - 1) % 18 == 0 then
      return true
    end
    pos = i + 1
  end
end

-- The k bit positions of a fingerprint: enhanced double hashing
-- (Dillinger & Manolios) on two 48-bit halves of it, exact in Lua's
-- doubles; a step of 0 would put every position on one bit, so it is 1.
local function bloom_positions(fp, m, k)
  local h1 = tonumber(string.sub(fp, 1, 12), 16) % m
  local h2 = tonumber(string.sub(fp, 13, 24), 16) % m
  if h2 == 0 then
    h2 = 1
  end
  local out = {}
  for i = 0, k - 1 do
    out[#out + 1] = h1
    h1 = (h1 + h2) % m
    h2 = (h2 + i + 1) % m
  end
  return out
end

local function bloom_key(d, n)
  if n == 1 then
    return d.key
  end
  return d.key .. ':' .. n
end

-- A filter's piece `p` (the first is the filter's own key).
local function bloom_piece_key(filter, p)
  if p == 1 then
    return filter
  end
  return filter .. ':piece:' .. p
end

-- The key of the piece of filter `n` that holds `fp`'s bits (picked by a
-- third 48-bit slice of the fingerprint), and the bits' positions in it.
local function bloom_where(d, n, fp)
  local plan = bloom_plan(d, n)
  local piece = 1
  if plan.pieces > 1 then
    piece = tonumber(string.sub(fp, 25, 36), 16) % plan.pieces + 1
  end
  return bloom_piece_key(bloom_key(d, n), piece), bloom_positions(fp, plan.a, plan.b)
end

-- Reads (`GET`) or sets (`SET`) `fp`'s bits in filter `n` in one
-- BITFIELD call; true when every one of them was already set.
local function bloom_bits(d, n, fp, op)
  local key, positions = bloom_where(d, n, fp)
  local args = {'BITFIELD', key}
  for _, p in ipairs(positions) do
    args[#args + 1] = op
    args[#args + 1] = 'u1'
    args[#args + 1] = p
    if op == 'SET' then
      args[#args + 1] = 1
    end
  end
  for _, bit in ipairs(redis.call(unpack(args))) do
    if bit == 0 then
      return false
    end
  end
  return true
end

-- The expiring mode's buckets that can hold an entry younger than the TTL.
local function expiring_buckets(d, now)
  local ttl, width = d.a, d.b
  return math.floor((now - ttl) / width), math.floor(now / width)
end

local function expiring_add(d, fp, bucket, now)
  local key = d.key .. ':' .. bucket
  local expiry = (bucket + 1) * d.b + d.a
  redis.call('SADD', key, fp)
  redis.call('PEXPIREAT', key, expiry)
  if redis.call('HSETNX', d.meta, 'bucket:' .. bucket, expiry) == 1 then
    -- A new bucket: forget the registry entries of expired ones.
    local meta = redis.call('HGETALL', d.meta)
    for i = 1, #meta, 2 do
      if string.sub(meta[i], 1, 7) == 'bucket:' and tonumber(meta[i + 1]) < now then
        redis.call('HDEL', d.meta, meta[i])
      end
    end
  end
end

-- A compact filter's hash field for `fp` (its first 2 bytes), the packed
-- record (the other 18) and the field's current value.
local function compact_slot(d, fp)
  local bin = hex_to_bin(fp)
  local field = string.sub(bin, 1, 2)
  return field, string.sub(bin, 3), redis.call('HGET', d.key, field)
end

-- Whether `fp` was seen, changing nothing. Also returns what adding it
-- needs: the compact slot, or the expiring bucket it was found in.
local function dupe_lookup(d, fp, now)
  local mode = d.mode
  if mode == 'exact' then
    return redis.call('SISMEMBER', d.key, fp) == 1
  elseif mode == 'compact' then
    local field, rest, v = compact_slot(d, fp)
    return v ~= false and v ~= nil and packed_has(v, rest), {field, rest, v}
  elseif mode == 'bloom' then
    local filters = tonumber(redis.call('HGET', d.meta, 'filters') or '1')
    for n = 1, filters do
      if bloom_bits(d, n, fp, 'GET') then
        return true
      end
    end
    return false
  else
    local oldest, current = expiring_buckets(d, now)
    for bucket = current, oldest, -1 do
      if redis.call('SISMEMBER', d.key .. ':' .. bucket, fp) == 1 then
        return true, bucket
      end
    end
    return false
  end
end

-- How many filters of a Bloom chain are made, ready to take entries. A
-- chain an older crawlworker began has no such field, and made each filter
-- as it began: all its filters are made (a chain that has taken no entry
-- has none).
local function bloom_ready(d)
  local ready = redis.call('HGET', d.meta, 'ready')
  if ready then
    return tonumber(ready)
  end
  if redis.call('HEXISTS', d.meta, 'count:1') == 1 then
    return tonumber(redis.call('HGET', d.meta, 'filters') or '1')
  end
  return 0
end

-- Filters up to this size are made by the script that first needs them;
-- larger ones only by bloom_grow.lua, ahead of need and within what the
-- server's memory holds (a script making one would pass maxmemory before
-- Redis could refuse it).
local BLOOM_INLINE_BYTES = 1048576

local function bloom_bytes(d, n)
  local plan = bloom_plan(d, n)
  return math.ceil(plan.a / 8) * plan.pieces
end

-- Whether filter `n` can take entries now: made already, or the next to
-- make and small enough to be made here (with `make`, it is made).
local function bloom_usable(d, n, make)
  local ready = bloom_ready(d)
  if ready >= n then
    return true
  end
  if ready ~= n - 1 or bloom_bytes(d, n) > BLOOM_INLINE_BYTES then
    return false
  end
  if make then
    -- Each piece at its full size in one allocation (bits set one by one
    -- would grow the string, and Redis over-allocates a growing string).
    local plan, key = bloom_plan(d, n), bloom_key(d, n)
    for p = 1, plan.pieces do
      redis.call('SETRANGE', bloom_piece_key(key, p), math.ceil(plan.a / 8) - 1, '\0')
    end
    redis.call('HSET', d.meta, 'ready', n)
  end
  return true
end

-- A Bloom filter records `fp` unless a filter has it: the older filters
-- are read, the newest is checked and set in one BITFIELD. A full filter
-- is followed by the next of the chain when it can take entries; a large
-- one the server had no room for is not, and the full one takes more
-- entries than planned meanwhile (its error rate rises: `stats` says so).
local function bloom_add(d, fp)
  local filters = tonumber(redis.call('HGET', d.meta, 'filters') or '1')
  for n = 1, filters - 1 do
    if bloom_bits(d, n, fp, 'GET') then
      return false
    end
  end
  if not bloom_usable(d, filters, true) then
    error(redis.error_reply(string.format(
      'DUPEFILTER the Bloom filter %d of %s is not made yet (a worker makes it, within the memory Redis has)',
      filters, d.key)))
  end
  local count = tonumber(redis.call('HGET', d.meta, 'count:' .. filters) or '0')
  if count >= bloom_plan(d, filters).c and bloom_usable(d, filters + 1, true) then
    if bloom_bits(d, filters, fp, 'GET') then
      return false
    end
    filters = filters + 1
    redis.call('HSET', d.meta, 'filters', filters)
  end
  if bloom_bits(d, filters, fp, 'SET') then
    return false
  end
  redis.call('HINCRBY', d.meta, 'count:' .. filters, 1)
  return true
end

-- Records `fp` unless it was seen; true when it is new.
local function dupe_add(d, fp, now)
  local mode = d.mode
  if mode == 'exact' then
    -- One command does both.
    return redis.call('SADD', d.key, fp) == 1
  elseif mode == 'bloom' then
    return bloom_add(d, fp)
  end
  local seen, found = dupe_lookup(d, fp, now)
  if mode == 'expiring' then
    local _, current = expiring_buckets(d, now)
    if not seen then
      expiring_add(d, fp, current, now)
    elseif d.c == 1 and found ~= current then
      -- Seen again: remembered for another TTL.
      expiring_add(d, fp, current, now)
    end
    return not seen
  end
  if seen then
    return false
  end
  local field, rest, v = found[1], found[2], found[3]
  redis.call('HSET', d.key, field, (v or '') .. rest)
  redis.call('HINCRBY', d.meta, 'entries', 1)
  return true
end

-- Forgets `fp` where the mode can (a Bloom filter cannot); true if it was
-- there.
local function dupe_forget(d, fp, now)
  local mode = d.mode
  if mode == 'exact' then
    return redis.call('SREM', d.key, fp) == 1
  elseif mode == 'compact' then
    local field, rest, v = compact_slot(d, fp)
    if not v then
      return false
    end
    for i = 1, #v, 18 do
      if string.sub(v, i, i + 17) == rest then
        local left = string.sub(v, 1, i - 1) .. string.sub(v, i + 18)
        if left == '' then
          redis.call('HDEL', d.key, field)
        else
          redis.call('HSET', d.key, field, left)
        end
        redis.call('HINCRBY', d.meta, 'entries', -1)
        return true
      end
    end
    return false
  elseif mode == 'expiring' then
    local oldest, current = expiring_buckets(d, now)
    local found = false
    for bucket = oldest, current do
      if redis.call('SREM', d.key .. ':' .. bucket, fp) == 1 then
        found = true
      end
    end
    return found
  end
  return false
end

-- How many entries the filter holds (the mode's own count: never a scan).
local function dupe_entries(d, mode, now)
  local entries = 0
  if mode == 'exact' then
    entries = redis.call('SCARD', d.key)
  elseif mode == 'compact' then
    entries = tonumber(redis.call('HGET', d.meta, 'entries') or '0')
  elseif mode == 'bloom' then
    local filters = tonumber(redis.call('HGET', d.meta, 'filters') or '1')
    for n = 1, filters do
      entries = entries + tonumber(redis.call('HGET', d.meta, 'count:' .. n) or '0')
    end
  else
    local oldest, current = expiring_buckets(d, now)
    for bucket = oldest, current do
      entries = entries + redis.call('SCARD', d.key .. ':' .. bucket)
    end
  end
  return entries
end

-- Every key the filter uses besides the dupefilter and meta keys.
local function dupe_extra_keys(key, meta)
  local out = {}
  local filters, spec = 1, nil
  local fields = redis.call('HGETALL', meta)
  for i = 1, #fields, 2 do
    local name, value = fields[i], fields[i + 1]
    if string.sub(name, 1, 7) == 'bucket:' then
      out[#out + 1] = key .. ':' .. string.sub(name, 8)
    elseif name == 'filters' then
      filters = tonumber(value)
    elseif name == 'spec' then
      spec = value
    end
  end
  if spec and string.sub(spec, 1, 6) == 'bloom:' then
    local d = dupe_config(spec, key, meta)
    for n = 1, filters do
      local filter = bloom_key(d, n)
      if n > 1 then
        out[#out + 1] = filter
      end
      for p = 2, bloom_plan(d, n).pieces do
        out[#out + 1] = bloom_piece_key(filter, p)
      end
    end
  end
  return out
end
