-- The per-host politeness rule (src/frontier/politeness.rs is its Rust
-- reference, whose constants are generated above): a request's host,
-- slot reservation with jitter, and the adaptive back-off a response's
-- news moves.

-- The politeness key of a stored request: its URL's authority without user
-- info, lower-cased. Request::host_key in Rust computes the same.
-- crawlworker writes "url" first, so the common case is one anchored
-- match.
local function host_of(json)
  local authority = string.match(json, '^{"url":"[%a][%w+.-]*://([^/?#"]*)')
  if not authority then
    local url = string.match(json, '"url":"([^"]*)"')
    if not url then
      return nil
    end
    local rest = string.match(url, '^[%a][%w+.-]*://(.*)$') or url
    authority = string.match(rest, '^([^/?#]*)') or ''
  end
  if string.find(authority, '@', 1, true) then
    authority = string.match(authority, '@([^@]*)$')
  end
  if string.find(authority, '%u') then
    authority = string.lower(authority)
  end
  return authority
end

-- The spider's delay `base` ms randomised between 0.5x and 1.5x from a
-- `seed` (the microseconds of the Redis clock) and a `salt` that differs
-- per slot (politeness::jittered).
local function jittered(base, seed, salt)
  local step = (seed * JITTER_SEED_PRIME + salt * JITTER_SALT_PRIME) % 1000
  return math.floor(base * (0.5 + step / 1000))
end

-- Reserves the next politeness slot of `host` for the whole cluster and
-- returns how many ms to wait for it, and the interval applied. The
-- interval is the largest of the spider's (`base_ms`, randomised
-- 0.5x-1.5x when `jitter` is set), the host's Crawl-delay, its adaptive
-- back-off and `floor_ms` (a Crawl-delay the caller knows, if any). With
-- no interval at all nothing is written.
local function reserve_slot(pace, host_delay, backoff, host, base_ms, jitter, now, salt, floor_ms)
  local interval = base_ms
  if jitter and base_ms > 0 then
    interval = jittered(base_ms, clock_us, salt)
  end
  interval = math.max(interval, host_get(host_delay, host), host_get(backoff, host), floor_ms or 0)
  local next_free = host_get(pace, host)
  if interval <= 0 and next_free <= now then
    return 0, 0
  end
  local slot = math.max(now, next_free)
  host_set(pace, host, slot + interval)
  return slot - now, interval
end

-- Adaptive back-off, shared by the cluster (politeness.rs explains the
-- rule). Two signals set a host's delay (the back-off hash, which
-- reserve_slot applies to every slot):
--
-- * Strict: a 429, or a 5xx with Retry-After ('slow'), doubles the delay
--   (at least SLOW_MIN_MS, at least Retry-After, at most the longest
--   back-off) and keeps everyone away until Retry-After has passed; each
--   good response takes a fifth off again (RECOVERY).
-- * Proportional: every 5xx or 429 ('error', 'slow') and good response
--   ('ok') moves the host's error share e (per mille, the errors hash)
--   ERROR_WEIGHT of the way to 1000 or 0, an exponentially weighted
--   average over about the last ten responses. Up to ERROR_TOLERATED (one
--   in five) the host keeps full speed; above it the delay climbs
--   exponentially to the longest back-off at e = 1000 (error_delay).
--
-- The delay stored is the larger of the two. Whatever of it the error
-- share does not explain is the strict part, so no third number is kept.
local ERROR_CURVE = 2 ^ ERROR_STEEPNESS - 1

-- The delay (ms) an error share of `e` per mille calls for.
local function error_delay(e, backoff_max)
  if e <= ERROR_TOLERATED then
    return 0
  end
  local u = (e - ERROR_TOLERATED) / (1000 - ERROR_TOLERATED)
  return math.floor(backoff_max * (2 ^ (ERROR_STEEPNESS * u) - 1) / ERROR_CURVE)
end

-- A host that keeps back-off state gets a slot at least at now (a slot
-- in the past is no slot at all): the time it was last heard of, by which
-- sweep.lua forgets the state of a host left alone.
local function mark_active(K, host, keeps_state, now)
  if keeps_state and host_get(K.pace, host) < now then
    host_set(K.pace, host, now)
  end
end

-- Applies what a response said of `host` (`outcome` 'slow', 'error' or
-- 'ok'; `wait` the Retry-After ms of 'slow') at `now`, with the spider's
-- longest back-off `backoff_max` (HostState::news).
local function host_news(K, host, outcome, wait, now, backoff_max)
  local old = host_get(K.backoff, host)
  local old_e = host_get(K.backoff_errors, host)
  -- Most news: a good response from a host with no back-off and no
  -- errors, which changes nothing.
  if outcome == 'ok' and old == 0 and old_e == 0 then
    return
  end
  local e = math.floor(old_e * (1 - ERROR_WEIGHT) + (outcome == 'ok' and 0 or 1000 * ERROR_WEIGHT))
  local strict = 0
  if old > error_delay(old_e, backoff_max) then
    strict = old
  end
  if outcome == 'slow' then
    wait = tonumber(wait)
    strict = math.min(math.max(old * 2, SLOW_MIN_MS, wait), backoff_max)
    if now + wait > host_get(K.pace, host) then
      host_set(K.pace, host, now + wait)
    end
  elseif outcome == 'ok' then
    strict = math.floor(strict * RECOVERY)
    if strict < STRICT_FORGOTTEN_MS then
      strict = 0
    end
  end
  local new = math.max(strict, error_delay(e, backoff_max))
  if new > 0 then
    if new ~= old then
      host_set(K.backoff, host, new)
    end
  elseif old > 0 then
    host_del(K.backoff, host)
  end
  -- A share under ERROR_FORGOTTEN is forgotten, so healthy hosts leave no
  -- entry.
  if e >= ERROR_FORGOTTEN then
    if e ~= old_e then
      host_set(K.backoff_errors, host, e)
    end
  elseif old_e > 0 then
    host_del(K.backoff_errors, host)
  end
  if outcome == 'slow' or (outcome == 'error' and new > 0) then
    count(STAT.BACKOFF_SLOWED, 1)
  end
  mark_active(K, host, new > 0 or e >= ERROR_FORGOTTEN, now)
end
