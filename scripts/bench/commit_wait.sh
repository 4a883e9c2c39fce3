#!/usr/bin/env bash
# What a page's commit waiting for company (`commit_wait`) costs one
# worker that is not CPU-bound: the generated forum served with a latency
# (5 ms by default) to a worker of few download slots (4 by default), so
# the worker's slots, not its CPU, bound the crawl, as a worker on a
# many-core machine is bound. Runs each `commit_wait` in turn (A B C A B
# C …), for one or more builds, and prints pages per second, script calls
# per page and the worker's CPU per page, then the medians.
#
#     scripts/bench/commit_wait.sh                                  # this checkout: 0ms 2ms 20ms, 3 runs each
#     WAITS="2ms 20ms" REPS=5 scripts/bench/commit_wait.sh ./old target/release/crawlworker
#     CONCURRENCY=8 SERVE="--latency 20ms" scripts/bench/commit_wait.sh
#
# Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-3}
WAITS=${WAITS:-0ms 2ms 20ms}
CONCURRENCY=${CONCURRENCY:-4}
SIZE=${SIZE:---forums 4 --pages 30}
SERVE=${SERVE:---latency 5ms}
port=${REDIS_PORT:-16615}
demo_port=${DEMO_PORT:-18815}
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 1; }

. scripts/bench/forum_setup.sh
forum_builds release "$@"
forum_work
forum_redis redis-server
forum_site

for _ in $(seq "$REPS"); do
  for bin in "${builds[@]}"; do
    for wait in $WAITS; do
      forum_fresh
      t0=$(date +%s.%N)
      env CRAWLWORKER_ROBOTSTXT_OBEY=false CRAWLWORKER_REDIS_URL="redis://127.0.0.1:$port" \
        CRAWLWORKER_CONCURRENT_REQUESTS="$CONCURRENCY" CRAWLWORKER_COMMIT_WAIT="$wait" \
        /usr/bin/time -f "%U %S" -o "$work/time" "$bin" run "$work/bbs.toml" --until-drained \
        >"$work/worker.log" 2>&1
      t1=$(date +%s.%N)
      pages=$(redis-cli -p "$port" hget bbs:stats downloader/response_count)
      calls=$(script_calls)
      read -r usr sys <"$work/time"
      printf '%s commit_wait=%s pages_per_s=%.1f calls_per_page=%.3f worker_us_per_page=%.1f pages=%s\n' \
        "$bin" "$wait" "$(echo "$pages / ($t1 - $t0)" | bc -l)" "$(echo "$calls / $pages" | bc -l)" \
        "$(echo "($usr + $sys) * 1000000 / $pages" | bc -l)" "$pages"
    done
  done
done | tee "$work/runs.txt"

echo "== medians of $REPS runs (concurrent_requests = $CONCURRENCY, serve $SERVE)"
for bin in "${builds[@]}"; do
  for wait in $WAITS; do
    grep -F "$bin commit_wait=$wait " "$work/runs.txt" |
      sed 's/.*pages_per_s=\([^ ]*\) calls_per_page=\([^ ]*\) worker_us_per_page=\([^ ]*\) .*/\1 \2 \3/' |
      awk -v what="$bin commit_wait=$wait" '{ p[NR] = $1; c[NR] = $2; w[NR] = $3 }
        function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
          return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END { printf "%s: %.1f pages/s, %.3f script calls/page, worker %.1f us/page\n", what, med(p, NR), med(c, NR), med(w, NR) }'
  done
done
