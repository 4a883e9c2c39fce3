-- Basics every script uses: numbers from arguments, the queue score,
-- whole numbers for Redis, the server's clock, commands over long lists,
-- a number field of a JSON record,
-- and escaping foreign bytes for JSON records. (The helpers come after
-- the STAT table of stat names and the constants Rust generates; see
-- src/frontier/redis/scripts.rs.)
--
-- Queue order: higher priority first, FIFO among equal priorities. A sorted
-- set orders by score, so the score is -priority * 2^40 + sequence: the
-- priority (clamped to ±MAX_PRIORITY) in the high part, the enqueue
-- sequence in the low part. Every score stays below 2^53, exact in a double.
local SEQ_SPAN = 1099511627776

-- A number from an argument: the small counts most arguments hold come
-- from a table, since tonumber (strtod) is a large share of what a page
-- costs a script.
local SMALL = {['0'] = 0, ['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4, ['5'] = 5, ['6'] = 6, ['7'] = 7, ['8'] = 8,
               ['9'] = 9}
local function num(s)
  return SMALL[s] or tonumber(s)
end

local function queue_score(priority, seq)
  return -num(priority) * SEQ_SPAN + (seq % SEQ_SPAN)
end

-- A whole number as Redis receives it: '%d' is much cheaper than the
-- '%.17g' a Lua number passed to redis.call is formatted with.
local function int(n)
  return string.format('%d', n)
end

-- Milliseconds of the Redis server's clock, so lease deadlines do not
-- depend on the clocks of the workers' hosts. The microseconds of the
-- reading are kept as a seed for jitter (Redis scripts have no useful
-- random source).
local clock_us = 0
local function now_ms()
  local t = redis.call('TIME')
  clock_us = tonumber(t[2])
  return tonumber(t[1]) * 1000 + math.floor(clock_us / 1000)
end

-- A new empty list with room for 32 entries. Appending to an empty
-- table makes Lua rehash it at 1, 2, 4, 8, … entries, each rehash a walk
-- over the whole table: the lists a commit builds (queue entries, leases,
-- items, stats) cost it about 1 % of its instructions that way. A list
-- that outgrows the room grows as before.
local function new_list()
  return {nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
end

-- The table `t` emptied for another call (a new one if nil), keeping the
-- room Lua made for its entries: the per-call tables of the helpers below
-- (key types, stats, host numbers) hold the same keys call after call,
-- which then go back in place without a rehash.
local function cleared(t)
  if t == nil then
    return {}
  end
  for k in next, t do
    t[k] = nil
  end
  return t
end

-- Runs `command key v1 v2 …` over the values of `list`, 1000 at a time
-- (Lua's unpack has a limit): one command for a whole batch. Pairs stay
-- whole (1000 is even). Returns the sum of the replies that are numbers
-- (what a ZADD added, a ZREM removed).
local function call_many(command, key, list)
  local n, sum = #list, 0
  for first = 1, n, 1000 do
    local r = redis.call(command, key, unpack(list, first, math.min(first + 999, n)))
    if type(r) == 'number' then
      sum = sum + r
    end
  end
  return sum
end

-- A number field of a JSON record, without decoding it (a robots.txt body
-- may be large): crawlworker writes it last, so the tail is read first.
local function json_number(json, name)
  local pattern = '"' .. name .. '":%s*([-+%d.eE]+)'
  return tonumber(string.match(string.sub(json, -64), pattern) or string.match(json, pattern) or '')
end

-- `s` with every byte that is not part of UTF-8 text shown as \xNN, as
-- wording::escaped shows it, so that a record holding foreign bytes (a
-- queue member another tool wrote) stays JSON every reader can read. It
-- walks every byte: for rare paths only.
local function escaped(s)
  if not string.find(s, '[\128-\255]') then
    return s
  end
  local out, i, n = {}, 1, #s
  while i <= n do
    local c = string.byte(s, i)
    local len = 0
    if c < 0x80 then
      len = 1
    elseif c >= 0xC2 and c <= 0xDF then
      len = 2
    elseif c >= 0xE0 and c <= 0xEF then
      len = 3
    elseif c >= 0xF0 and c <= 0xF4 then
      len = 4
    end
    local ok = len > 0 and i + len - 1 <= n
    if ok and len > 1 then
      for j = i + 1, i + len - 1 do
        local b = string.byte(s, j)
        if b < 0x80 or b > 0xBF then
          ok = false
          break
        end
      end
      -- No overlong forms, surrogates or code points past U+10FFFF.
      local b2 = string.byte(s, i + 1)
      if ok and ((c == 0xE0 and b2 < 0xA0) or (c == 0xED and b2 > 0x9F) or (c == 0xF0 and b2 < 0x90)
          or (c == 0xF4 and b2 > 0x8F)) then
        ok = false
      end
    end
    if ok then
      out[#out + 1] = string.sub(s, i, i + len - 1)
      i = i + len
    else
      out[#out + 1] = string.format('\\x%02x', c)
      i = i + 1
    end
  end
  return table.concat(out)
end
