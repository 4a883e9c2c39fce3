-- Who holds the in-flight leases (for `stats`): per worker, how many and
-- when the last of them expires.
--
-- Keys: `leases` in protocol.rs.
-- Returns {now ms, worker1, count1, last deadline1, worker2, ...}.
local now = now_ms()
local owners = redis.call('HGETALL', K.leases)
local count, last, order = {}, {}, {}
for i = 1, #owners, 2 do
  local id, owner = owners[i], owners[i + 1]
  if id ~= OWNERS_NOTE_FIELD then
    local worker = string.match(owner, '^(.*)|[^|]*$') or owner
    local deadline = tonumber(redis.call('ZSCORE', K.inflight, id) or '0')
    if not count[worker] then
      count[worker], last[worker] = 0, 0
      order[#order + 1] = worker
    end
    count[worker] = count[worker] + 1
    if deadline > last[worker] then
      last[worker] = deadline
    end
  end
end
local out = {now}
for _, worker in ipairs(order) do
  out[#out + 1] = worker
  out[#out + 1] = count[worker]
  out[#out + 1] = last[worker]
end
return out
