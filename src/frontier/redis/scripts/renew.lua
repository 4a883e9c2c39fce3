-- Extend worker A.worker's leases on the ids after the head arguments by
-- A.lease_ms from now. Returns the ids whose lease the worker no longer
-- holds.
--
-- Keys and arguments: `renew` in protocol.rs.
local worker = A.worker
local deadline = now_ms() + tonumber(A.lease_ms)
local lost = {}
for i = REST, #ARGV do
  local id = ARGV[i]
  if owned_by(redis.call('HGET', K.leases, id), worker) then
    redis.call('ZADD', K.inflight, deadline, id)
  else
    lost[#lost + 1] = id
  end
end
return lost
