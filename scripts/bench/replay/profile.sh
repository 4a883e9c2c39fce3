#!/usr/bin/env bash
# Where a recorded crawl's script time goes, by Lua helper
# (scripts/bench/replay/profile.py): the recording (record.sh) replayed
# into a plain redis-server with its library's helpers timed, then a
# table of calls, inclusive and self milliseconds, and microseconds per
# call, dearest first. The times are the Redis clock's, so run it on a
# quiet machine; instructions.sh gives the deterministic total.
#
#     scripts/bench/replay/profile.sh /tmp/rec.mon
#     scripts/bench/replay/profile.sh /tmp/rec.mon /tmp/other-build.mon
set -euo pipefail
rec=$(realpath "${1:?usage: profile.sh REC.mon [OTHER.mon]}")
other=${2:+$(realpath "$2")}
port=${REDIS_PORT:-16622}
cd "$(dirname "$0")/../../.."
. scripts/bench/forum_setup.sh
forum_work
forum_redis redis-server
name=$(cd scripts/bench/replay && python3 profile.py "$rec" "$work/timed.mon" $other)
python3 scripts/bench/replay/replay.py "$rec" "$port" "$work/timed.mon"
echo "| helper | calls | ms, inclusive | ms, self | µs per call |"
echo "|---|---:|---:|---:|---:|"
redis-cli -p "$port" fcall "${name}_profile" 0 | sort -k3 -g -r |
  awk '{ printf "| %s | %d | %.1f | %.1f | %.1f |\n", $1, $2, $3 * 1000, $4 * 1000, $3 * 1e6 / $2 }'
