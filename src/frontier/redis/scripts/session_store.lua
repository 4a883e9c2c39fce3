-- Store what a login gave, only while A.holder still holds the login lock
-- (a login that outlived its deadline stores nothing: another worker may
-- be logging in by now), and free the lock. A successful login (A.ok = 1)
-- makes the next generation of the session; either way the accounts'
-- login history is kept.
--
-- Keys and arguments: `session_store` in protocol.rs.
-- Returns 1 when stored, 0 when the lock was no longer the holder's.
if redis.call('GET', K.session_lock) ~= A.holder then
  return 0
end
redis.call('DEL', K.session_lock)
redis.call('HSET', K.session, 'accounts', A.accounts)
if A.ok == '1' then
  redis.call('HINCRBY', K.session, 'generation', 1)
  redis.call('HINCRBY', K.session, 'logins', 1)
  redis.call('HSET', K.session, 'cookie', A.cookie, 'account', A.account,
    'created_ms', now_ms(), 'stale', '0')
end
return 1
