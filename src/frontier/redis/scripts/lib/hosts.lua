-- Per-host numbers, cached for the call and written once at its end.

-- Per-host numbers (politeness slots, Crawl-delays, back-off, pages per
-- host), read once per script call and written at its end (flush_hosts,
-- one HSET and one HDEL per key): a batch of pages and leases for one host
-- reads and writes each of them once.
local host_cache, host_dirty, host_dirty_list = {}, {}, {}

-- With `kind` (the key's name in [keys]), a read made before the
-- script's first write, which proves the key (see prove_by).
local function host_get(key, host, kind)
  local by_host = host_cache[key]
  if not by_host then
    by_host = {}
    host_cache[key] = by_host
  end
  local v = by_host[host]
  if v == nil then
    local raw
    if kind then
      raw = prove_by('hash', kind, 'HGET', key, host)
    else
      raw = redis.call('HGET', key, host)
    end
    v = num(raw or '0') or 0
    by_host[host] = v
  end
  return v
end

-- The cache emptied for another call, each key's table of hosts kept
-- (see cleared).
local function emptied_hosts(cache)
  for _, by_host in next, cache do
    cleared(by_host)
  end
  return cache
end

-- `v` false deletes the field.
local function host_set(key, host, v)
  host_get(key, host)
  local by_host = host_cache[key]
  local mark = key .. '\n' .. host
  if host_dirty[mark] == nil then
    host_dirty_list[#host_dirty_list + 1] = {key, host}
  end
  host_dirty[mark] = v ~= false
  by_host[host] = v or 0
end

local function host_del(key, host)
  host_set(key, host, false)
end

local function flush_hosts()
  if #host_dirty_list > 0 then
    before_write()
  end
  local keys, sets, dels = {}, {}, {}
  for _, kh in ipairs(host_dirty_list) do
    local key, host = kh[1], kh[2]
    if not sets[key] then
      keys[#keys + 1] = key
      sets[key], dels[key] = {}, {}
    end
    if host_dirty[key .. '\n' .. host] then
      local list = sets[key]
      list[#list + 1] = host
      list[#list + 1] = int(host_cache[key][host])
    else
      local list = dels[key]
      list[#list + 1] = host
    end
  end
  for _, key in ipairs(keys) do
    call_many('HSET', key, sets[key])
    call_many('HDEL', key, dels[key])
  end
  host_dirty, host_dirty_list = cleared(host_dirty), cleared(host_dirty_list)
end
