#!/usr/bin/env bash
# Redis instructions per page of a recorded crawl (scripts/bench/replay/record.sh)
# replayed into a Redis under valgrind's callgrind: deterministic on a busy
# machine, and the same calls for every variant compared.
#
#     REDIS_SERVER=~/redis-7.0.15/src/redis-server scripts/bench/replay/instructions.sh /tmp/rec.mon
#     REDIS_SERVER=... scripts/bench/replay/instructions.sh /tmp/rec.mon /tmp/other-build.mon
#
# With a second recording, its scripts (its Functions library) answer the
# first recording's calls (see replay.py). With REPLAY_CLOCK=recorded the
# scripts read the recording's clock, so two replays of the same calls
# take the same paths (see replay.py): compare builds by scripts_per_page
# (the FCALLs' instructions, which then differ by under 0.1 % between
# replays of one build; the total, Redis's cron and client I/O included,
# moves with the replay's wall time by about 0.4 %).
#
# REDIS_SERVER: a redis-server built with symbols (`make` in a redis checkout), so that
# callgrind_annotate can name where the work goes.
set -euo pipefail
rec=$(realpath "${1:?usage: instructions.sh REC.mon [OTHER.mon]}")
other=${2:+$(realpath "$2")}
port=${REDIS_PORT:-16621}
cd "$(dirname "$0")/../../.."
. scripts/bench/forum_setup.sh
callgrind_server
forum_work
forum_redis valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" "$server"
python3 scripts/bench/replay/replay.py "$rec" "$port" $other
pages=$(redis-cli -p "$port" hget bbs:stats downloader/response_count)
items=$(redis-cli -p "$port" llen bbs:items)
calls=$(script_calls)
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$redis_pid" || true
# KEEP_CALLGRIND=FILE keeps the profile, for callgrind_annotate.
[ -z "${KEEP_CALLGRIND:-}" ] || cp "$work/callgrind.out" "$KEEP_CALLGRIND"
read -r total scripts < <(callgrind_counts "$work/callgrind.out")
echo "pages=$pages items=$items script_calls=$calls instructions=$total per_page=$((total / pages))" \
  "scripts_per_page=$((${scripts:-0} / pages))"
