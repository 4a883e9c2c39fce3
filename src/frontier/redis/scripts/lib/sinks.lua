-- Item sinks: the list or the stream, and a stream's back-pressure.

-- Item sinks. `arg` is the scripts' sink argument (SinkOptions::arg):
-- 'list', or 'stream:<max backlog>' (0: no bound).
local function item_sink(arg)
  local max = string.match(arg, '^stream:(%d+)$')
  return {stream = max ~= nil, max_backlog = tonumber(max or '0')}
end

-- An error reply when the items key holds another type than the sink
-- writes (nil when it does not).
local function sink_type_error(key, sink)
  local found = redis.call('TYPE', key).ok
  local want = sink.stream and 'stream' or 'list'
  if found ~= 'none' and found ~= want then
    return redis.error_reply(string.format(
      'WRONGTYPE key %s ([keys] items) is a %s, not the %s [items] sink = "%s" writes; nothing was written', key, found,
      want, want))
  end
end

-- Pushes the JSON strings `items` to the items key as `sink` writes them.
-- A script pushes them before its other writes (a block of sequence
-- numbers aside, see commit.lua), so its first command proves
-- the key without a TYPE (see prove_by): when it fails (another tool made
-- the key another type), nothing is written yet and the error names the
-- key, its type and the sink's (a command failing half-way through a
-- script would leave the script's earlier writes in place).
local function push_items(key, sink, items)
  local n = #items
  if n == 0 then
    return
  end
  local first, pushed
  if sink.stream then
    first, pushed = redis.pcall('XADD', key, '*', 'item', items[1]), 1
  else
    pushed = math.min(n, 1000)
    first = redis.pcall('RPUSH', key, unpack(items, 1, pushed))
  end
  if type(first) == 'table' and first.err then
    error(sink_type_error(key, sink) or first)
  end
  if sink.stream then
    for i = pushed + 1, n do
      redis.call('XADD', key, '*', 'item', items[i])
    end
  else
    for from = pushed + 1, n, 1000 do
      redis.call('RPUSH', key, unpack(items, from, math.min(from + 999, n)))
    end
  end
end

-- Stream ids 'ms-seq' in order.
local function id_before(a, b)
  local a_ms, a_seq = string.match(a, '^(%d+)-(%d+)$')
  local b_ms, b_seq = string.match(b, '^(%d+)-(%d+)$')
  a_ms, b_ms = tonumber(a_ms) or 0, tonumber(b_ms) or 0
  return a_ms < b_ms or (a_ms == b_ms and (tonumber(a_seq) or 0) < (tonumber(b_seq) or 0))
end

-- The items of stream `key` its slowest consumer group has not
-- acknowledged: per group, the entries not yet delivered (its lag; the
-- whole stream when Redis cannot tell) plus those delivered and pending;
-- without groups, the whole stream. With `trim`, entries every group has
-- acknowledged are trimmed (MINID ~: never more, sometimes fewer).
local function items_backlog(key, trim)
  if redis.call('TYPE', key).ok ~= 'stream' then
    return 0
  end
  local length = redis.call('XLEN', key)
  local groups = redis.call('XINFO', 'GROUPS', key)
  if #groups == 0 then
    return length
  end
  local backlog, keep = 0, nil
  for _, g in ipairs(groups) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    local lag = tonumber(f['lag']) or length
    local pending = tonumber(f['pending']) or 0
    backlog = math.max(backlog, lag + pending)
    local first = f['last-delivered-id']
    if pending > 0 then
      first = redis.call('XPENDING', key, f['name'])[2]
    end
    if keep == nil or id_before(first, keep) then
      keep = first
    end
  end
  if trim and keep then
    before_write()
    redis.call('XTRIM', key, 'MINID', '~', keep)
  end
  return backlog
end

-- Back-pressure of a stream sink: true while its backlog is at the bound,
-- and then nothing is leased. The control hash says since when
-- (`items_backlog_full`, for `stats` and the workers' logs); idle workers
-- look again within BACKLOG_RECHECK_MS, since consumers acknowledging
-- items announce nothing.
local BACKLOG_RECHECK_MS = 1000
local function sink_full(K, now, trim)
  local sink = K.sink
  if not sink or not sink.stream or sink.max_backlog <= 0 then
    return false
  end
  local backlog = items_backlog(K.items, trim)
  before_write()
  if backlog < sink.max_backlog then
    redis.call('HDEL', K.control, 'items_backlog_full')
    return false
  end
  if redis.call('HSETNX', K.control, 'items_backlog_full', int(now)) == 1 then
    count(STAT.ITEMS_BACKLOG_FULL, 1)
  end
  slot_due = math.min(slot_due or BACKLOG_RECHECK_MS, BACKLOG_RECHECK_MS)
  return true
end
