"""Where a recording's script time goes, by Lua helper: the library of
REC.mon (or of OTHER.mon) with its helpers timed, for replay.py.

    python3 scripts/bench/replay/profile.py REC.mon TIMED.mon [OTHER.mon]
    (replay REC.mon into a Redis with TIMED.mon's library, then)
    redis-cli FCALL <library>_profile 0

Every helper defined before the first function (the shared library code)
and every function is wrapped: a call records its time from the Redis
clock (TIME; Redis 7.0 scripts have no os.clock), inclusive and without
the wrapped helpers it called. The tiny helpers called per field (num,
int, host_get, ...) are left out: the wrapper's own cost, two TIME calls
of about a microsecond, would swamp them. It still lands on every
wrapped call, so a helper called many times looks dearer than it is;
compare helpers called about as often, and variants of one helper.
scripts/bench/replay/profile.sh runs it all.
"""
import re
import sys

from replay import library
from library import escaped

# Called per field or per link: the wrapper would cost more than they do.
TINY = {'num', 'int', 'host_get', 'host_set', 'host_del', 'count', 'queue_score', 'escaped', 'json_number',
        'hex_to_bin', 'packed_has', 'bloom_key', 'bloom_piece_key', 'owner_score', 'owned_by', 'fair_share',
        'waiting_entry', 'before_write', 'host_of', 'jittered', 'error_delay', 'begin_call',
        # The library's globals, bound before the clock can be read.
        'runtime_globals', 'bind_globals'}

TIMING = '''
local __profile, __child = {}, 0
local function __clock()
  -- The library's globals are its locals, bound on a call's first use.
  bind_globals()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end
local function __done(name, t0, saved, ...)
  local dt = __clock() - t0
  local p = __profile[name]
  if not p then
    p = {0, 0, 0}
    __profile[name] = p
  end
  p[1], p[2], p[3] = p[1] + 1, p[2] + dt, p[3] + dt - __child
  __child = saved + dt
  return ...
end
local function __wrap(name, f)
  return function(...)
    local saved = __child
    __child = 0
    return __done(name, __clock(), saved, f(...))
  end
end
'''

REPORT = '''
REGISTER_FUNCTION{function_name = FUNCTION_PREFIX .. 'profile', callback = function()
  local out = {}
  for name, p in pairs(__profile) do
    out[#out + 1] = string.format('%s %d %.6f %.6f', name, p[1], p[2], p[3])
  end
  return out
end}
'''


def timed(text):
    """`text` (a library) with its helpers and functions timed."""
    # The first function registered (through the library's local
    # REGISTER_FUNCTION, taken from `redis` before the helpers).
    first = text.index('REGISTER_FUNCTION{')
    head, tail = text[:first], text[first:]
    names = [n for n in re.findall(r'^local function ([a-z_0-9]+)', head, re.M) if n not in TINY]
    wraps = ''.join(f"{n} = __wrap('{n}', {n})\n" for n in names)
    tail = re.sub(r"(FUNCTION_PREFIX \.\. '([a-z_]+)', callback = )function\(keys, args\)\n",
                  lambda m: f"{m.group(1)}__wrap('{m.group(2)}()', function(keys, args)\n", tail)
    tail = re.sub(r"\nend((, flags = \{'no-writes'\})?)\}\n", r"\nend)\1}\n", tail)
    return head + TIMING + wraps + tail + REPORT


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    text, name = library(sys.argv[3] if len(sys.argv) == 4 else sys.argv[1])
    out = timed(text.decode('latin-1')).encode('latin-1')
    with open(sys.argv[2], 'w', encoding='latin-1') as f:
        f.write('0.000000 [0 127.0.0.1:1] "FUNCTION" "LOAD" "REPLACE" "%s"\n' % escaped(out))
    print(name.decode())


if __name__ == '__main__':
    main()
