#!/usr/bin/env bash
# A worker's instructions per page, counted by valgrind's callgrind: one
# worker crawls the generated forum to the end under callgrind, for one or
# more builds in turn. Instruction counts barely move with a busy machine
# (CPU time moves by ±20 % here), so a cut of a few per cent in the
# worker's work per page shows; what still moves them is how many pages
# each commit carries (about 0.5 % between runs of one build).
#
#     scripts/bench/worker_instructions.sh                           # this checkout's profiling build
#     scripts/bench/worker_instructions.sh ./old-crawlworker target/profiling/crawlworker
#     KEEP=/tmp/cg scripts/bench/worker_instructions.sh               # and keep each profile (callgrind_annotate)
#
# Builds with symbols (`cargo build --profile profiling`) let
# callgrind_annotate name where the instructions go. The default forum is
# smaller than the other benchmarks' (1,394 pages): a worker runs about
# 50 times slower under callgrind. Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-1}
SIZE=${SIZE:---forums 4 --pages 30}
port=${REDIS_PORT:-16618}
demo_port=${DEMO_PORT:-18818}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }

. scripts/bench/forum_setup.sh
forum_builds profiling "$@"
forum_work
forum_redis redis-server
forum_site

n=0
for _ in $(seq "$REPS"); do
  for bin in "${builds[@]}"; do
    n=$((n + 1))
    forum_fresh
    CRAWLWORKER_ROBOTSTXT_OBEY=false CRAWLWORKER_REDIS_URL="redis://127.0.0.1:$port" \
      valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.$n" \
      "$bin" run "$work/bbs.toml" --until-drained >"$work/worker.log" 2>&1
    pages=$(redis-cli -p "$port" hget bbs:stats downloader/response_count)
    items=$(redis-cli -p "$port" llen bbs:items)
    calls=$(script_calls)
    total=0
    # One file per thread and process part: sum their totals.
    for f in "$work/callgrind.$n"*; do
      t=$(callgrind_annotate "$f" 2>/dev/null | grep "PROGRAM TOTALS" | head -1 | awk '{print $1}' | tr -d ,)
      total=$((total + ${t:-0}))
    done
    [ -z "${KEEP:-}" ] || { mkdir -p "$KEEP"; cp "$work/callgrind.$n"* "$KEEP/"; }
    printf '%s pages=%s items=%s calls_per_page=%.3f instructions_per_page=%d\n' \
      "$bin" "$pages" "$items" "$(echo "$calls / $pages" | bc -l)" "$((total / pages))"
  done
done
