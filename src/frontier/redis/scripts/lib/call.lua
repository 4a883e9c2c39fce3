-- What the helpers above keep during one call (the lower-case locals
-- outside any function), made new for every call. A script sent with
-- EVALSHA gets fresh helpers on each call anyway; as a Redis Function (see
-- scripts.rs) it shares them with every call before it, so it starts with
-- this. A test checks that every such local is reset here. A function
-- also binds the globals' locals on its first call (globals_block in
-- scripts.rs; a script sent with EVALSHA has no such locals and never
-- calls this).
local function begin_call()
  bind_globals()
  key_types, write_checks, clock_us = cleared(key_types), nil, 0
  tally_fields, tally, stat_values = cleared(tally_fields), cleared(tally), cleared(stat_values)
  host_cache, host_dirty, host_dirty_list = emptied_hosts(host_cache), cleared(host_dirty), cleared(host_dirty_list)
  slot_due, paused_read, PARKING.back = nil, nil, 0
  crew_scores, crew_size, over_share, queue_sizes = cleared(crew_scores), nil, false, nil
end
