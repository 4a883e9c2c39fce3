-- Proving key types before a script writes (scripts do not roll back).

-- Key types, proved before a script writes anything: Redis scripts do not
-- roll back, so a command failing on a key another tool made with the
-- wrong type would leave the script's earlier writes in place (half a
-- commit). Every key a script writes, or reads after its first write, is
-- proved first, once per script call (remembered in `key_types`): by a
-- read the script needs anyway (see prove_by), or else by one TYPE
-- (need). A missing key is always fine. A wrong one raises a WRONGTYPE
-- error naming the key, its kind in [keys], its type and the type
-- expected; nothing is written.
local key_types = {}

-- Checks now that `key` (its kind's name in [keys]: `kind`) is missing or
-- holds a `want` (as TYPE names it).
local function need(key, want, kind)
  local found = key_types[key]
  if found == nil then
    found = redis.call('TYPE', key).ok
    key_types[key] = found
  end
  if found ~= want and found ~= 'none' then
    error(redis.error_reply(string.format(
      'WRONGTYPE key %s ([keys] %s) is a %s, not a %s as crawlworker writes it; nothing was written', key, kind,
      found, want)))
  end
end

-- `command key …`, a read the script makes before its first write (or
-- the first write itself): its success proves `key` a `want` (or
-- missing), and a failure names the key (see need) with nothing written.
local function prove_by(want, kind, command, key, ...)
  local r = redis.pcall(command, key, ...)
  if type(r) == 'table' and r.err then
    need(key, want, kind)
    error(r)
  end
  if key_types[key] == nil then
    key_types[key] = want
  end
  return r
end

-- Proves the keys a write to the dupefilter `d` (see dupe_config)
-- touches. Bloom filters after the first and expiring buckets are keys of
-- crawlworker's own naming.
local DUPE_TYPES = {exact = 'set', compact = 'hash', bloom = 'string'}
-- A Bloom filter is written only once it is made whole (see bloom_ready).
local function need_dupe(d)
  if not d then
    return
  end
  local want = DUPE_TYPES[d.mode]
  if want then
    need(d.key, want, 'dupefilter')
  end
  if d.mode ~= 'exact' then
    need(d.meta, 'hash', 'dupefilter_meta')
  end
  if d.mode == 'bloom' then
    local filters = tonumber(redis.call('HGET', d.meta, 'filters') or '1')
    if not bloom_usable(d, filters, false) then
      error(redis.error_reply(string.format(
        'DUPEFILTER the Bloom filter %d of %s is not made yet (a worker makes it at start, within the memory Redis has); nothing was written',
        filters, d.key)))
    end
  end
end

-- A function a script sets to prove its keys the first time it is about
-- to write (before_write): a call that writes nothing (an idle worker's
-- lease) proves nothing.
local write_checks = nil
local function before_write()
  if write_checks then
    local checks = write_checks
    write_checks = nil
    checks()
  end
end
