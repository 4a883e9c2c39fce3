-- Store what a login gave, and free the login lock, while A.holder still
-- holds it. A successful login (A.ok = 1) makes the next generation of the
-- session; either way the accounts' login history is kept. With
-- A.keep_lock = 1 only the history is written and the lock kept: the
-- attempt is counted before the form is sent.
--
-- A login that outlived the lock's deadline writes no history (another
-- worker may have written newer since), but its session is kept when no
-- newer one was stored meanwhile (the generation is still A.seen, the one
-- it replaces): a login slower than login_timeout is not thrown away and
-- done again forever.
--
-- Keys and arguments: `session_store` in protocol.rs.
-- Returns 1 when stored, 0 when nothing was.
local function store_session()
  redis.call('HINCRBY', K.session, 'generation', 1)
  redis.call('HINCRBY', K.session, 'logins', 1)
  redis.call('HSET', K.session, 'cookie', A.cookie, 'account', A.account,
    'created_ms', now_ms(), 'stale', '0')
end
if redis.call('GET', K.session_lock) ~= A.holder then
  local generation = tonumber(redis.call('HGET', K.session, 'generation') or '0')
  if A.ok == '1' and A.keep_lock ~= '1' and generation == tonumber(A.seen) then
    store_session()
    return 1
  end
  return 0
end
redis.call('HSET', K.session, 'accounts', A.accounts)
if A.keep_lock == '1' then
  return 1
end
redis.call('DEL', K.session_lock)
if A.ok == '1' then
  store_session()
end
return 1
