-- Make room ahead of need in a Bloom dupefilter's chain: the filter the
-- chain is on, and the next one once it is half full. One piece of one
-- filter per call, each made whole in one SETRANGE (so it is one
-- allocation) and only if the server's memory has room for it, so making a
-- large filter never takes Redis past its maxmemory (or, without one, past
-- its machine's memory): a refusal is this spider's error, never an outage
-- for every client of that Redis. The commits never make a filter (see
-- bloom_add).
--
-- Keys and arguments: `bloom_grow` in protocol.rs (A.headroom_permille:
-- the share of maxmemory, or of the machine's memory, that used memory
-- may reach).
-- Returns {filters made, state}: state '' when nothing more is needed now,
-- 'more' when the caller should call again, or why the next piece cannot be
-- made (with the sizes).
local meta = K.dupefilter_meta
local d = dupe_config(redis.call('HGET', meta, 'spec') or A.dupe_spec, K.dupefilter, meta)
if d.mode ~= 'bloom' then
  return {0, ''}
end
local filters = tonumber(redis.call('HGET', meta, 'filters') or '1')
local ready = bloom_ready(d)
local want = filters
local count = tonumber(redis.call('HGET', meta, 'count:' .. filters) or '0')
if count * 2 >= bloom_plan(d, filters).c then
  want = filters + 1
end
if ready >= want then
  return {ready, ''}
end
local n = ready + 1
local plan = bloom_plan(d, n)
local bytes = math.ceil(plan.a / 8)
local filter = bloom_key(d, n)
for p = 1, plan.pieces do
  local key = bloom_piece_key(filter, p)
  if redis.call('STRLEN', key) < bytes then
    local info = redis.call('INFO', 'memory')
    local used = tonumber(string.match(info, 'used_memory:(%d+)')) or 0
    local limit = tonumber(string.match(info, 'maxmemory:(%d+)')) or 0
    local of = 'maxmemory'
    if limit == 0 then
      limit, of = tonumber(string.match(info, 'total_system_memory:(%d+)')) or 0, 'the machine\'s memory'
    end
    local allowed = math.floor(limit * tonumber(A.headroom_permille) / 1000)
    -- The rest of the filter must fit, so none is left half made.
    if limit > 0 and used + bytes * (plan.pieces - p + 1) > allowed then
      return {ready, string.format(
        'filter %d of the Bloom chain needs %d bytes (%d pieces); Redis uses %d of the %d it may use (%d%% of %s, %d)',
        n, bytes * plan.pieces, plan.pieces, used, allowed, math.floor(tonumber(A.headroom_permille) / 10), of, limit)}
    end
    redis.call('SETRANGE', key, bytes - 1, '\0')
    return {ready, 'more'}
  end
end
redis.call('HSET', meta, 'ready', n)
return {n, 'more'}
