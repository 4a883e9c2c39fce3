-- Mark generation A.generation of the session stale (a worker saw a
-- response showing it logged out), once: N workers seeing it together
-- mark it once, and a newer generation is never marked by news of an
-- older one.
--
-- Keys and arguments: `session_stale` in protocol.rs.
-- Returns 1 when this call marked it, else 0.
local generation = redis.call('HGET', K.session, 'generation') or '0'
if generation ~= A.generation or redis.call('HGET', K.session, 'stale') == '1' then
  return 0
end
redis.call('HSET', K.session, 'stale', '1')
return 1
