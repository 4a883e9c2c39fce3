-- Take the cluster's login lock for A.ttl_ms, unless the session is newer
-- than generation A.seen and nobody saw it logged out (then return it), or
-- another worker holds the lock (it expires by itself, so a worker killed
-- mid-login locks nobody out for longer than its deadline).
--
-- Keys and arguments: `session_lock` in protocol.rs.
-- Returns {'fresh', field, value, …}, {'taken'} or {'busy'}.
local generation = tonumber(redis.call('HGET', K.session, 'generation') or '0')
local stale = redis.call('HGET', K.session, 'stale')
local cookie = redis.call('HGET', K.session, 'cookie')
if generation > tonumber(A.seen) and stale ~= '1' and cookie and cookie ~= '' then
  local out = redis.call('HGETALL', K.session)
  table.insert(out, 1, 'fresh')
  return out
end
if redis.call('SET', K.session_lock, A.holder, 'NX', 'PX', A.ttl_ms) then
  return {'taken'}
end
return {'busy'}
