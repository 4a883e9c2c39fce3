#!/usr/bin/env bash
# What a worker's memory holds at its peak: one worker crawls the
# generated forum (7,041 pages, no latency) to the end while
# scripts/bench/worker_memory.py samples its /proc/PID/smaps, for one or
# more builds run in turn; prints per run the peak resident memory split
# by kind (the binary's code, read-only data and data, shared libraries,
# thread stacks, heap), and the anonymous part of each (what a second
# worker on the host would add: the file pages are shared), then the
# medians per build, in MB.
#
#     scripts/bench/worker_memory.sh                                  # this checkout, 3 runs
#     REPS=5 scripts/bench/worker_memory.sh ./old-crawlworker target/release/crawlworker
#     ARGS="--threads 1" scripts/bench/worker_memory.sh               # flags for `run`'s worker
#
# Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-3}
SIZE=${SIZE:---forums 12 --pages 50}
port=${REDIS_PORT:-16616}
demo_port=${DEMO_PORT:-18816}
KINDS=(peak code "read-only data" data libraries "thread stacks" heap other anonymous
  "anonymous read-only data" "anonymous data" "anonymous heap" "anonymous thread stacks" threads)

. scripts/bench/forum_setup.sh
forum_builds release "$@"
forum_work
forum_redis redis-server
forum_site

for _ in $(seq "$REPS"); do
  for bin in "${builds[@]}"; do
    forum_fresh
    # shellcheck disable=SC2086
    env CRAWLWORKER_ROBOTSTXT_OBEY=false CRAWLWORKER_REDIS_URL="redis://127.0.0.1:$port" \
      "$bin" ${ARGS:-} run "$work/bbs.toml" --until-drained >"$work/worker.log" 2>&1 &
    worker=$!
    python3 scripts/bench/worker_memory.py "$worker" "$bin" "$work/memory.txt"
    wait "$worker"
    line="$bin"
    for k in "${KINDS[@]}"; do
      v=$(awk -v k="$k" '{ v = $NF; $NF = ""; sub(/ $/, ""); if ($0 == k) print v }' "$work/memory.txt")
      line+=" $(echo "$k" | tr ' ' '_')=${v:-0}"
    done
    echo "$line"
  done
done | tee "$work/runs.txt"

echo "== medians of $REPS runs, MB (threads: a count)"
for bin in "${builds[@]}"; do
  printf '%s:' "$bin"
  for k in "${KINDS[@]}"; do
    key=$(echo "$k" | tr ' ' '_')
    grep -F "$bin " "$work/runs.txt" | tr ' ' '\n' | sed -n "s/^$key=//p" | sort -n |
      awk -v k="$k" '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
        if (k == "threads") printf " %s %d", k, m; else printf " %s %.1f", k, m / 1024 }'
  done
  echo
done
