#!/usr/bin/env bash
# Redis instructions per page on a one-worker crawl of a generated forum,
# counted by valgrind's callgrind (see scripts/bench/ceiling_instructions.sh for
# why instructions and not CPU time). One release worker crawls the forum
# until drained; the whole Redis process is counted.
#
#     REDIS_SERVER=~/redis-7.0.15/src/redis-server scripts/bench/forum_instructions.sh
#     WORKER=/path/to/an/older/crawlworker REDIS_SERVER=... scripts/bench/forum_instructions.sh
#
# REDIS_SERVER: a redis-server built with symbols (`make` in a redis
# checkout), so that callgrind_annotate can name where the work goes.
set -euo pipefail
cd "$(dirname "$0")/../.."
server=${REDIS_SERVER:?set REDIS_SERVER to a redis-server built with symbols (make in a redis checkout)}
SIZE=${SIZE:---forums 12 --pages 50}
port=${REDIS_PORT:-16603}
demo_port=${DEMO_PORT:-18803}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }

cargo build --release --quiet -p crawlworker
worker=${WORKER:-target/release/crawlworker}
. scripts/bench/forum_setup.sh
forum_work
forum_redis valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" "$server"
forum_site
redis-cli -p "$port" rpush bbs:start_urls "${tasks[@]}" >/dev/null
CRAWLWORKER_ROBOTSTXT_OBEY=false CRAWLWORKER_REDIS_URL="redis://127.0.0.1:$port" \
  "$worker" run "$work/bbs.toml" --until-drained >"$work/worker.log" 2>&1
pages=$(redis-cli -p "$port" hget bbs:stats downloader/response_count)
calls=$(script_calls)
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$redis_pid" || true
callgrind_annotate "$work/callgrind.out" >"$work/annotated" 2>/dev/null
total=$(grep 'PROGRAM TOTALS' "$work/annotated" | head -1 | awk '{print $1}' | tr -d ,)
echo "pages=$pages script_calls=$calls pages_per_call=$(echo "scale=1; $pages / $calls" | bc)"
echo "Redis instructions per page: $((total / pages))"
