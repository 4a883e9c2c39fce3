-- The stats a script counts, summed over the call and written once.

-- Stat increments, summed over the script call and written at its end
-- (flush_tally) in one HSET: a batch of pages costs one read and one write
-- of the stats hash, not one HINCRBY per page and stat (nor per stat:
-- each command a script runs costs Redis more than the arithmetic here).
-- Fields keep the order they were first counted in.
local tally_fields, tally = {}, {}

local function count(field, n)
  n = num(n)
  if not n or n == 0 then
    return
  end
  local old = tally[field]
  if old == nil then
    tally_fields[#tally_fields + 1] = field
    tally[field] = n
  else
    tally[field] = old + n
  end
end

-- Values of the stats hash read in this call, by field (read_stats).
local stat_values = {}

-- Reads `fields` of the stats hash `stats` in one HMGET (a script reads
-- the fields it knows of before its first write, which proves the hash; see
-- prove_by). A field that is missing, or holds what is not a number
-- (another tool's), counts from 0.
local function read_stats(stats, fields)
  if #fields == 0 then
    return
  end
  local values = prove_by('hash', 'stats', 'HMGET', stats, unpack(fields))
  for i, field in ipairs(fields) do
    stat_values[field] = tonumber(values[i]) or 0
  end
end

local function flush_tally(stats)
  local unread, sets = {}, new_list()
  for _, field in ipairs(tally_fields) do
    if tally[field] ~= 0 and stat_values[field] == nil then
      unread[#unread + 1] = field
    end
  end
  read_stats(stats, unread)
  for _, field in ipairs(tally_fields) do
    local n = tally[field]
    if n ~= 0 then
      local v = stat_values[field] + n
      stat_values[field] = v
      sets[#sets + 1] = field
      sets[#sets + 1] = int(v)
    end
  end
  if #sets > 0 then
    before_write()
  end
  call_many('HSET', stats, sets)
  tally_fields, tally = cleared(tally_fields), cleared(tally)
end
