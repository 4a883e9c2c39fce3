-- Leasing: the lease owners' note, the pause, taking requests from the
-- queue with their politeness slots, when work is next due, the keys
-- leasing writes, and peeking at start entries.

-- The lease owners hash holds one note besides the leases. Its value is
-- longer than the 64 bytes up to which Redis packs a small hash as a
-- listpack (hash-max-listpack-value), so the hash is always a real hash
-- table: a listpack of a few hundred leases is scanned from end to end on
-- every look-up, and the owners hash is read or written three times per
-- page (measured: a quarter of Redis's CPU per page with 128-512 leases
-- in flight). It also keeps the key from vanishing between crawls.
local OWNERS_NOTE_FIELD = '~'
local OWNERS_NOTE = 'not a lease: crawlworker keeps this field so that Redis stores this hash as a hash table '
  .. '(lease look-ups stay O(1)); every other field is a leased request id -> "worker|queue score"'

-- Whether the spider is paused (`crawlworker pause`), read once per call
-- (a commit reads it before its first write, which proves the control
-- hash).
local paused_read = nil
local function paused(K)
  if paused_read == nil then
    paused_read = prove_by('hash', 'control', 'HEXISTS', K.control, 'paused') == 1
  end
  return paused_read
end

-- A worker's fair share of the `out` requests the crawl has out (queued
-- or leased), split among `crew` workers, less the `held` it holds
-- already (frontier::fairness::fair_room in Rust).
local function fair_share(out, crew, held)
  return math.max(0, math.ceil(out / math.max(1, crew)) - held)
end

-- The crew and the fair share of leases (the rule's Rust reference is
-- frontier::fairness). Every worker that leased or committed within a
-- lease is in the crew (K.crew: worker → until when, ms). A worker leases
-- at most its fair share of what the crawl has out (the queue and the
-- leases, divided among the crew) minus what it holds (A.held): the first
-- worker of a one-host crawl leaves its peers their share, and a worker
-- killed strands at most about a share until its leases expire.
--
-- The crew is read once per call (crew_scores, crew_size): it changes
-- only in crew_renew, at the end of a call. A commit reads its worker's
-- place before its first write (crew_member), which proves the key.
local crew_scores, crew_size = {}, nil
-- Whether a fair share computed in this call found its worker holding
-- over HAND_BACK_OVER times its share (frontier::fairness::over_share):
-- a commit then asks it to hand back what it cannot start (see
-- commit.lua).
local over_share = false
local function crew_member(K, worker)
  local mine = crew_scores[worker]
  if mine == nil then
    mine = prove_by('zset', 'crew', 'ZSCORE', K.crew, worker) or false
    crew_scores[worker] = mine
  end
  return mine
end
-- How many workers count as the crew now. Reads `worker`'s place first
-- (crew_member, read once per call), which proves the key.
local function crew_count(K, worker, now)
  crew_member(K, worker)
  if crew_size == nil then
    crew_size = redis.call('ZCOUNT', K.crew, '(' .. int(now), '+inf')
  end
  return crew_size
end
-- The requests queued and in flight (the queue's and the in-flight
-- set's sizes), read once per call and kept by the call's own moves from
-- then on (queue_sizes_moved), since a commit needs them for its fair
-- shares and its end-of-crawl check. A commit reads them before its first
-- write, which proves both keys. A step that moves requests without
-- counting the move (work coming due, see lease_requests) sets them to
-- nil, as they are before this call reads them.
local queue_sizes = nil
local function read_queue_sizes(K)
  if queue_sizes == nil then
    queue_sizes = {prove_by('zset', 'requests', 'ZCARD', K.requests),
                   prove_by('zset', 'inflight', 'ZCARD', K.inflight)}
  end
  return queue_sizes[1], queue_sizes[2]
end
local function queue_sizes_moved(queued, inflight)
  if queue_sizes then
    queue_sizes[1], queue_sizes[2] = queue_sizes[1] + queued, queue_sizes[2] + inflight
  end
end
local function fair_room(K, worker, held, now)
  local mine = crew_member(K, worker)
  local crew = crew_count(K, worker, now)
  if not mine or tonumber(mine) <= now then
    crew = crew + 1
  end
  local queued, inflight = read_queue_sizes(K)
  local out = queued + inflight
  if crew > 1 and held > HAND_BACK_OVER * math.ceil(out / crew) then
    over_share = true
  end
  return fair_share(out, crew, held), crew
end

-- A worker joining the crew (its first lease, or its first since it
-- left) that got less than it asked for tells its peers on the spider's
-- wake channel that the shares are smaller now (CREW_GREW_MARK, then
-- out:crew:queue key; frontier::fairness::CrewGrew): one holding over
-- HAND_BACK_OVER times the new share hands back what it cannot start at
-- once, rather than at its next commit, a response later. After
-- fair_room, whose readings it reuses (nothing is read after the lease's
-- writes), and before crew_renew, which forgets the worker's old place.
local function announce_joined(K, worker, wake, now)
  local mine = crew_scores[worker]
  if crew_size == nil or queue_sizes == nil or mine == nil or (mine and tonumber(mine) > now) then
    return
  end
  local crew = crew_size + 1
  local queued, inflight = queue_sizes[1], queue_sizes[2]
  if crew > 1 and inflight > 0 then
    redis.call('PUBLISH', wake, CREW_GREW_MARK .. int(queued + inflight) .. ':' .. int(crew) .. ':' .. K.requests)
  end
end

-- Parking (frontier::parking in Rust): its helpers go in the table its
-- generated constants are in (PARKING.SCAN, .RETURN_MAX, .SCORE), since a
-- script sent with EVALSHA has room for 200 locals in all.

-- The spacing of a host's slots (ms): the spider's delay, its
-- Crawl-delay or its back-off, whichever is longest.
function PARKING.spacing(K, host, pace_ms)
  return math.max(pace_ms, host_get(K.host_delay, host), host_get(K.backoff, host))
end

-- A paced host's politeness slots belong to the whole crew: with others
-- in it, a worker reserves at most SLOTS_AHEAD of them in one call, and
-- none more than SLOTS_AHEAD slots per worker of the crew ahead of now,
-- so the next slots go to its peers rather than all to whoever leased
-- first (frontier::fairness::beyond_share in Rust). `ahead` counts what
-- this call took per host. An unpaced host has no slots to share.
-- Returns false (the request may be leased), true (this call took its
-- share of the host's slots: left for another call) or, when the crew's
-- slots ahead of now are all taken, when they come within reach again
-- (ms, the clock's), to park the request until then.
local function beyond_share(K, host, now, pace_ms, crew, ahead)
  local spacing = PARKING.spacing(K, host, pace_ms)
  if spacing <= 0 then
    return false
  end
  local due = host_get(K.pace, host) - now - SLOTS_AHEAD * crew * spacing
  if due > 0 then
    return now + due
  end
  return (ahead[host] or 0) >= SLOTS_AHEAD
end

-- A scan that parks reads on in windows of this many entries.
PARKING.WINDOW = 128

-- How deep a scan at `from` that has just parked an entry may go: a
-- window past where it is, PARKING.SCAN past its usual depth at most.
function PARKING.deeper(depth, from, reach)
  return math.min(reach, math.max(depth + 1, from + PARKING.WINDOW))
end

-- Notes a request to park (see PARKING.park).
function PARKING.later(parked, id, score, host, reach)
  parked[#parked + 1] = id
  parked[#parked + 1] = score
  parked[#parked + 1] = host
  parked[#parked + 1] = reach
end

-- A parked request's member of K.parked: its host, its queue place (the
-- score made whole and positive, padded, so a host's members sort in
-- queue order) and its id.
PARKING.OFFSET = MAX_PRIORITY * SEQ_SPAN
function PARKING.member(host, score, id)
  return host .. ' ' .. string.format('%016d', tonumber(score) + PARKING.OFFSET) .. ' ' .. id
end

-- Parks the requests a lease found out of their host's reach (`parked`:
-- id, queue score, host and when the host's slot comes within reach, four
-- entries each; frontier::parking in Rust): each stays queued, but at
-- PARKING.SCORE, behind every request that is not, and its host keeps it
-- in K.parked, in queue order, until its turn (K.parked_hosts, at the
-- earliest reach found) puts it back at its place (PARKING.release). A
-- host's backlog so never stands at the queue's head in front of other
-- hosts' work. The two parking keys are written with pcall, before the
-- queue is touched: if another tool made one of them another type, the
-- requests stay where they are and the call stays whole.
function PARKING.park(K, parked)
  if #parked == 0 then
    return
  end
  local turns, members, scores, seen = {}, {}, {}, {}
  for i = 1, #parked, 4 do
    local id, host = parked[i], parked[i + 2]
    if not seen[host] then
      seen[host] = true
      turns[#turns + 1] = int(parked[i + 3])
      turns[#turns + 1] = host
    end
    members[#members + 1] = 0
    members[#members + 1] = PARKING.member(host, parked[i + 1], id)
    scores[#scores + 1] = int(PARKING.SCORE)
    scores[#scores + 1] = id
  end
  local written = redis.pcall('ZADD', K.parked_hosts, 'LT', unpack(turns))
  if type(written) == 'table' and written.err then
    return
  end
  written = redis.pcall('ZADD', K.parked, unpack(members))
  if type(written) == 'table' and written.err then
    return
  end
  redis.call('ZADD', K.requests, 'XX', unpack(scores))
  count(STAT.SCHEDULER_PARKED, #scores / 2)
end

-- Puts back at their queue places the parked requests of the hosts whose
-- turn has come (up to 64 hosts a call): as many of each host's as its
-- slots within `max_wait` (PARKING.RETURN_MAX at most), its next turn once
-- those slots have passed (frontier::parking::returning and next_look); a
-- host with none left leaves K.parked_hosts. A member whose request has
-- left the queue meanwhile is only forgotten. Counts what it put back in
-- PARKING.back, for the caller to wake the workers waiting for work. Read
-- and written with pcall (see PARKING.park): parking keys of another type
-- are left alone.
function PARKING.release(K, now, pace_ms, max_wait)
  local due = redis.pcall('ZRANGEBYSCORE', K.parked_hosts, '-inf', int(now), 'LIMIT', 0, 64)
  if due.err or #due == 0 then
    return
  end
  before_write()
  for _, host in ipairs(due) do
    local spacing = math.max(1, PARKING.spacing(K, host, pace_ms))
    local ahead = math.max(0, host_get(K.pace, host) - now)
    local n = math.max(1, math.min(PARKING.RETURN_MAX, math.floor(math.max(0, max_wait - ahead) / spacing) + 1))
    local members = redis.pcall('ZRANGEBYLEX', K.parked, '[' .. host .. ' ', '(' .. host .. '!', 'LIMIT', 0, n)
    if members.err then
      return
    end
    for _, member in ipairs(members) do
      local place, id = string.match(member, ' (%d+) (.*)$')
      if place then
        redis.call('ZADD', K.requests, 'XX', int(tonumber(place) - PARKING.OFFSET), id)
      end
    end
    call_many('ZREM', K.parked, members)
    PARKING.back = PARKING.back + #members
    if #members < n then
      redis.call('ZREM', K.parked_hosts, host)
    else
      redis.call('ZADD', K.parked_hosts, int(now + n * spacing), host)
    end
  end
end

-- Leases up to `max` requests to `worker` until now + lease_ms, appending
-- id, JSON, politeness wait (ms), interval applied (ms) to `out`. K is the
-- shared key table (see KEYS in lease.lua). With `release` set, work that
-- has come due is put back in the queue first: expired leases (a request
-- whose lease expired `max_expiries` times becomes a dead letter instead:
-- see requeue_expired), retries whose delay has passed, scheduled
-- revisits. (The lease script always
-- does; a commit only when its worker asks, a few times a second, since
-- one ZRANGEBYSCORE each per page would be most of a commit's cost.)
--
-- Requests are taken in queue order, but one whose host's next slot is
-- more than `max_wait` ms away (or past the crew's share of the host's
-- slots) is parked until it comes within reach (see park): a worker never
-- fills its leases with requests for one slow (or backed-off) host, and
-- that host's backlog never stands in front of other hosts' requests. The
-- scan looks at most 4 x `max` queue entries deep, and up to PARKING.SCAN
-- deeper for the entries it parks. A queue member with no request behind it (written by
-- something other than crawlworker) is set aside rather than left to block
-- the queue.
--
-- Nothing is leased while the spider is paused (`crawlworker pause`) or
-- its item stream's backlog is full (sink_full), nor
-- beyond `max_pages` responses (responses received, counted ones
-- included, plus requests in flight; nil: no limit), the whole cluster's
-- limit or, in a sharded spider, this shard's cap of it (page_cap); a
-- request whose host has had `max_per_host` pages leased is dropped and
-- counted.
--
-- With `held` (the leases the worker holds), `max` is cut to the worker's
-- fair share (see fair_room).
--
-- The share of page limit `max` that shard `place` ('<index>:<count>')
-- starts with: the limit cut in equal parts, the first shards one more
-- each for what is left over, so the shares add up to it.
local function shard_share(max, place)
  local index, count = string.match(place, '^(%d+):(%d+)$')
  index, count = tonumber(index), tonumber(count)
  return math.floor(max / count) + ((index < max % count) and 1 or 0)
end

-- The page limit this step leases under (nil: none): `max_pages` itself
-- for a spider that is not sharded (`place` ''), else this shard's cap of
-- it (docs/scaling.md, "max_pages over shards"), kept in the control hash
-- (quota_cap, and quota_max, the limit it was made for): the shard's
-- share of the limit when the crawl first used it, plus what other shards
-- gave it and less what it gave them (quota_give.lua, quota_take.lua),
-- moved by the change of its share when the limit changed. The caps and
-- the moves under way add up to the limit, so the shards together lease
-- no more than it.
local function page_cap(K, max_pages, place)
  if max_pages <= 0 then
    return nil
  end
  if place == '' then
    return max_pages
  end
  local got = redis.call('HMGET', K.control, 'quota_cap', 'quota_max')
  local cap, was = tonumber(got[1]), tonumber(got[2])
  if cap and was == max_pages then
    return cap
  end
  cap = (cap or 0) + shard_share(max_pages, place) - (was and shard_share(was, place) or 0)
  before_write()
  redis.call('HSET', K.control, 'quota_cap', cap, 'quota_max', max_pages)
  return cap
end

-- A request whose host's slot is out of this lease's reach is parked
-- (see PARKING.park) rather than left standing at the queue's head: the
-- scan parks up to PARKING.SCAN of them beyond the depth it scans anyway,
-- so a slow host's backlog is moved out of the way in a few calls however
-- deep it is. Returns `max` after the fair share's cut.
local function lease_requests(K, worker, lease_ms, max, now, pace_ms, jitter, max_wait, max_pages, max_per_host,
                              release, max_expiries, held, out)
  if release then
    queue_sizes = nil
    requeue_expired(K, now, max_expiries)
    requeue_due(K.delayed, K.delayed_scores, K.requests, K.request_data, now)
    release_revisits(K, now)
    PARKING.release(K, now, pace_ms, max_wait)
  end
  local crew, ahead = 1, {}
  if held and max > 0 then
    local room, n = fair_room(K, worker, held, now)
    max, crew = math.min(max, room), n
  end
  if max <= 0 or paused(K) or sink_full(K, now, release) then
    return max
  end
  if max_pages then
    local _, inflight = read_queue_sizes(K)
    local used = tonumber(redis.call('HGET', K.stats, STAT.RESPONSE_RECEIVED_COUNT) or '0')
      + (tally[STAT.RESPONSE_RECEIVED_COUNT] or 0) + inflight
    before_write()
    if used >= max_pages then
      if redis.call('HSETNX', K.control, 'max_pages_reached', now) == 1 then
        count(STAT.QUOTA_MAX_PAGES_REACHED, 1)
      end
      return max
    end
    -- A limit raised since it was reached.
    redis.call('HDEL', K.control, 'max_pages_reached')
    max = math.min(max, max_pages - used)
  end
  local deadline = int(now + lease_ms)
  local owner_prefix = worker .. '|'
  local leased = 0
  local unqueue, forget, inflight, owners = new_list(), {}, new_list(), new_list()
  -- The queue is read from the head in windows of as many entries as
  -- leases are missing (scores formatted and parsed cost Redis more than
  -- anything else here), up to 4 x `max` entries deep; once it parks,
  -- in windows of PARKING.WINDOW, up to PARKING.SCAN deeper. Nothing
  -- leaves the queue until the scan is over, so the windows do not shift.
  local from, depth, reach = 0, max * 4, max * 4 + PARKING.SCAN
  local parked = {}
  while leased < max and from < depth do
    local want = math.min(#parked > 0 and PARKING.WINDOW or max - leased, 500, depth - from)
    local window = redis.call('ZRANGE', K.requests, '-inf', '(' .. int(PARKING.SCORE), 'BYSCORE', 'LIMIT', int(from), int(want),
      'WITHSCORES')
    if #window == 0 then
      break
    end
    before_write()
    from = from + #window / 2
    local ids = {}
    for j = 1, #window, 2 do
      ids[#ids + 1] = window[j]
    end
    local jsons = redis.call('HMGET', K.request_data, unpack(ids))
    for j = 1, #ids do
      local id, score, json = ids[j], window[2 * j], jsons[j]
      if leased >= max then
        -- A parking scan's window may hold more than it leases.
        break
      elseif not json then
        -- Set aside with its dead letter. The dead list is not proved
        -- before this call's first write (a member without data is rare,
        -- and proving it would cost every call a TYPE): if another tool
        -- made it something else, the member stays queued, the call stays
        -- whole, and the next scan meets it again.
        local letter = redis.pcall('RPUSH', K.dead, cjson.encode({
          key = K.requests, entry = escaped(string.sub(id, 1, 1024)), bytes = #id,
          reason = 'queue member has no request data (not written by crawlworker?)',
          time = now / 1000,
        }))
        if type(letter) == 'number' then
          unqueue[#unqueue + 1] = id
          count(STAT.DEADLETTER_COUNT, 1)
        end
      else
        local host = host_of(json)
        if host and max_per_host > 0 and host_get(K.host_pages, host) >= max_per_host then
          unqueue[#unqueue + 1] = id
          forget[#forget + 1] = id
          count(STAT.QUOTA_HOST_DROPPED, 1)
        elseif host and host_get(K.pace, host) - now > max_wait then
          -- Parked (see PARKING.park), and the scan goes deeper.
          PARKING.later(parked, id, score, host, host_get(K.pace, host) - max_wait)
          depth = PARKING.deeper(depth, from, reach)
        elseif host and crew > 1 and beyond_share(K, host, now, pace_ms, crew, ahead) then
          -- Left for the crew's other workers, or parked until the crew's
          -- slots ahead come within reach (see beyond_share; its numbers
          -- are the call's cache, so asking twice costs no command).
          local until_ms = beyond_share(K, host, now, pace_ms, crew, ahead)
          if until_ms ~= true then
            PARKING.later(parked, id, score, host, until_ms)
            depth = PARKING.deeper(depth, from, reach)
          end
        else
          if host and crew > 1 then
            ahead[host] = (ahead[host] or 0) + 1
          end
          if host and max_per_host > 0 then
            host_set(K.host_pages, host, host_get(K.host_pages, host) + 1)
          end
          unqueue[#unqueue + 1] = id
          inflight[#inflight + 1] = deadline
          inflight[#inflight + 1] = id
          owners[#owners + 1] = id
          owners[#owners + 1] = owner_prefix .. score
          local wait, interval = 0, 0
          if host then
            wait, interval = reserve_slot(K.pace, K.host_delay, K.backoff, host, pace_ms, jitter, now, from + j)
          end
          out[#out + 1] = id
          out[#out + 1] = json
          out[#out + 1] = wait
          out[#out + 1] = interval
          leased = leased + 1
        end
      end
    end
    -- A window short of what it asked for reached the queue's end.
    if #window / 2 < want then
      break
    end
  end
  PARKING.park(K, parked)
  -- Parked as deep as it may: more of a backlog may be behind, so the
  -- worker asks again at once (next_due) rather than at the host's turn.
  if depth >= reach and from >= depth then
    slot_due = 0
  end
  local unqueued = call_many('ZREM', K.requests, unqueue)
  call_many('HDEL', K.request_data, forget)
  queue_sizes_moved(-unqueued, call_many('ZADD', K.inflight, inflight))
  if #owners > 0 then
    owners[#owners + 1] = OWNERS_NOTE_FIELD
    owners[#owners + 1] = OWNERS_NOTE
  end
  call_many('HSET', K.leases, owners)
  count(STAT.SCHEDULER_DEQUEUED, leased)
  return max
end

-- Milliseconds until work that announces itself to nobody may be there
-- to lease (-1: none known): the next scheduled revisit, retry or lease
-- expiry, or the slot a request left queued waits for. An idle worker
-- sleeps until then (or a wake-up) instead of polling.
local function next_due(K, now)
  local due = slot_due or -1
  for _, key in ipairs({K.schedule, K.delayed, K.inflight, K.parked_hosts}) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first == 2 then
      local ms = math.max(0, tonumber(first[2]) - now)
      if due < 0 or ms < due then
        due = ms
      end
    end
  end
  return due
end

-- Proves the keys lease_requests (and next_due)
-- may write, or read after a write: the keys due work comes back from
-- only with `release`, the pages-per-host hash only with a `max_per_host`
-- cap.
local function need_lease_keys(K, max_per_host, release)
  need(K.requests, 'zset', 'requests')
  need(K.request_data, 'hash', 'request_data')
  need(K.inflight, 'zset', 'inflight')
  need(K.leases, 'hash', 'leases')
  need(K.stats, 'hash', 'stats')
  need(K.pace, 'hash', 'pace')
  need(K.host_delay, 'hash', 'host_delay')
  need(K.backoff, 'hash', 'backoff')
  need(K.control, 'hash', 'control')
  if release then
    need(K.delayed, 'zset', 'delayed')
    need(K.delayed_scores, 'hash', 'delayed_scores')
    need(K.sequence, 'string', 'sequence')
    need(K.schedule, 'zset', 'schedule')
    need(K.schedule_data, 'hash', 'schedule_data')
    need(K.schedule_due, 'zset', 'schedule_due')
  end
  if max_per_host > 0 then
    need(K.host_pages, 'hash', 'host_pages')
  end
  need(K.crew, 'zset', 'crew')
end

-- Up to `n` start entries, without removing them (claim_start does).
local function peek_start(key, kind, n)
  if n <= 0 then
    return {}
  end
  local r
  if kind == 'list' then
    r = redis.pcall('LRANGE', key, 0, n - 1)
  elseif kind == 'set' then
    r = redis.pcall('SRANDMEMBER', key, n)
  else
    r = redis.pcall('ZRANGE', key, 0, n - 1, 'REV')
  end
  if r.err then
    -- Named when it is the key's type (a start key pushed by another tool).
    need(key, kind, 'start_urls')
    error(r)
  end
  return r
end

-- Renews `worker`'s place in the crew for a lease, and with `forget`,
-- forgets the workers gone for as long (and what they waited for). Run
-- after the call's other writes. A place this call read (crew_member)
-- with nine tenths of a lease still to run is kept as it is: a busy
-- worker commits many times a second, and each renewal is a command.
-- (Gone workers are not counted in the crew whether forgotten or not;
-- a commit forgets them when its worker asks for due work, a few times a
-- second, and every lease does.)
local function crew_renew(K, worker, now, lease_ms, forget)
  local mine = crew_scores[worker]
  crew_scores, crew_size = cleared(crew_scores), nil
  if not (mine and tonumber(mine) - now >= lease_ms * 0.9) then
    redis.call('ZADD', K.crew, int(now + lease_ms), worker)
  end
  if not forget then
    return
  end
  local gone = redis.call('ZRANGEBYSCORE', K.crew, '-inf', int(now))
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', K.crew, '-inf', int(now))
    -- What they waited for. Not proved before the call's first write (a
    -- TYPE each call): a waiting key another tool made something else
    -- holds no entries to forget, and the HDEL fails alone.
    for first = 1, #gone, 1000 do
      redis.pcall('HDEL', K.waiting, unpack(gone, first, math.min(first + 999, #gone)))
    end
  end
end

-- Records what a worker's lease asked for and did not get (`want`; 0:
-- it got all), so a commit that queues work wakes it (see hand_waiting),
-- or, when it `takes` handed leases (its own wake channel is subscribed),
-- leases that work to it (see hand_waiting). The entry is the number,
-- then '|h' for a worker that takes handed leases, then, for a worker
-- outside the crew (a sharded spider's visitor, whose note crew_renew
-- cannot forget), '@' and until when (ms) the note holds: past it, the
-- worker is gone or has not needed this shard for a lease.
local function note_waiting(K, worker, want, takes, expiry)
  need(K.waiting, 'hash', 'waiting')
  if want > 0 then
    redis.call('HSET', K.waiting, worker,
      int(want) .. (takes and '|h' or '') .. (expiry and '@' .. int(expiry) or ''))
  else
    redis.call('HDEL', K.waiting, worker)
  end
end

-- A waiting entry (see note_waiting): what the worker waits for,
-- whether it takes handed leases, and until when it holds (nil: while the
-- worker is in the crew).
local function waiting_entry(value)
  local want, flag, expiry = string.match(value or '', '^(%d+)(|?h?)@?(%d*)$')
  return tonumber(want) or 1, flag == '|h', tonumber(expiry)
end

-- What a handed lease's wake-up carries (frontier::redis::handed reads
-- it): HANDED_MARK, then the queue key the leases are of and each lease's
-- id, JSON, wait and interval, every one as <length>:<bytes>.
local function handed_message(queue, out)
  local parts = {HANDED_MARK, #queue, ':', queue}
  for _, v in ipairs(out) do
    v = tostring(v)
    parts[#parts + 1] = #v
    parts[#parts + 1] = ':'
    parts[#parts + 1] = v
  end
  return table.concat(parts)
end

-- Gives the `avail` requests a step queued and did not lease to the
-- workers waiting for work (other than `self`, the committer, whose own
-- commit leased what it asked for), as many as can use them, each up to
-- what it waits for and the fair share `fair`. With a `lease` function
-- (`lease(worker, max, out)`, leasing as the committer's own lease does),
-- a worker that takes handed leases is leased its part in this same step
-- and gets the leases in its wake-up (on its own channel,
-- `channel`:<worker>), so it need not ask Redis for them; if it got less
-- than it waits for, it stays noted for the rest. Any other worker, and
-- every one when there is no `lease` (a step that cannot lease), is woken
-- with the count to lease itself, and forgotten: it says again what it
-- still waits for. Other workers, busy or idle, are not disturbed. Stops
-- at the first worker that could be leased nothing: the rest is not
-- leasable now (its hosts' turns have not come, the spider is paused),
-- and a wake-up would find nothing. A lease whose wake-up never arrives
-- (the worker is gone) expires and goes back to the queue.
local function hand_waiting(K, channel, avail, fair, self, lease)
  if avail <= 0 then
    return
  end
  -- Read after the step's writes and not proved before them (a TYPE
  -- every commit): a waiting key another tool made something else lists
  -- nobody to wake, and its workers' own leases name it (note_waiting).
  local waiting = redis.pcall('HGETALL', K.waiting)
  if waiting.err then
    return
  end
  local done, short, now = {}, {}, nil
  for i = 1, #waiting, 2 do
    if avail <= 0 then
      break
    end
    local worker = waiting[i]
    local wants, takes, expiry = waiting_entry(waiting[i + 1])
    local max = math.max(1, math.min(wants, fair))
    if expiry then
      now = now or now_ms()
    end
    if expiry and expiry <= now then
      -- A visitor's note it has not renewed for a lease: forgotten, as a
      -- crew member's is when its place ends.
      done[#done + 1] = worker
    elseif worker == self then
      -- Its own commit leased what it asked for.
    elseif not (takes and lease) then
      redis.call('PUBLISH', channel .. ':' .. worker, int(avail))
      done[#done + 1] = worker
      avail = avail - max
    else
      local out = {}
      lease(worker, math.min(max, avail), out)
      local got = #out / 4
      if got == 0 then
        break
      end
      redis.call('PUBLISH', channel .. ':' .. worker, handed_message(K.requests, out))
      avail = avail - got
      if got < wants then
        short[#short + 1] = worker
        short[#short + 1] = int(wants - got) .. '|h' .. (expiry and '@' .. int(expiry) or '')
      else
        done[#done + 1] = worker
      end
    end
  end
  call_many('HDEL', K.waiting, done)
  call_many('HSET', K.waiting, short)
end
