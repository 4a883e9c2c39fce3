-- Extend worker ARGV[1]'s leases on the ids ARGV[3..] by ARGV[2] ms from
-- now. Returns the ids whose lease the worker no longer holds.
--
-- KEYS: 1 in-flight, 2 lease owners
local worker, lease_ms = ARGV[1], tonumber(ARGV[2])
local deadline = now_ms() + lease_ms
local lost = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  if owned_by(redis.call('HGET', KEYS[2], id), worker) then
    redis.call('ZADD', KEYS[1], deadline, id)
  else
    lost[#lost + 1] = id
  end
end
return lost
