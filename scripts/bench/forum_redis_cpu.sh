#!/usr/bin/env bash
# Redis CPU per page of one-worker crawls of the generated forum (or of
# WORKERS workers at once), for one or more crawlworker builds run in
# turn (A B C A B C …), with medians.
# On a shared machine CPU time moves by ±20 % between runs; alternating
# the builds spreads that over all of them, and the worker's own CPU per
# run (which moves with the machine too) is printed beside Redis's.
#
#     scripts/bench/forum_redis_cpu.sh                                # this checkout, 6 runs
#     REPS=8 scripts/bench/forum_redis_cpu.sh ./old-crawlworker target/release/crawlworker
#     WORKERS=2 scripts/bench/forum_redis_cpu.sh       # two workers at once; CPU summed
#
# Prints per run: Redis CPU per page (INFO used_cpu_user + used_cpu_sys
# over the crawl), script calls per page (INFO commandstats), wall time,
# worker CPU (user + system) and its voluntary context switches (summed
# over the workers); then the medians per build. Everything listens on
# 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-6}
WORKERS=${WORKERS:-1}
SIZE=${SIZE:---forums 12 --pages 50}
port=${REDIS_PORT:-16614}
demo_port=${DEMO_PORT:-18814}
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 1; }

. scripts/bench/forum_setup.sh
forum_builds release "$@"
forum_work
forum_redis redis-server
forum_site

redis_cpu() {
  redis-cli -p "$port" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'
}

for _ in $(seq "$REPS"); do
  for bin in "${builds[@]}"; do
    forum_fresh
    c0=$(redis_cpu)
    t0=$(date +%s.%N)
    rm -f "$work"/time.*
    crawlers=()
    for w in $(seq "$WORKERS"); do
      env CRAWLWORKER_ROBOTSTXT_OBEY=false CRAWLWORKER_REDIS_URL="redis://127.0.0.1:$port" \
        /usr/bin/time -f "%U %S %w" -o "$work/time.$w" "$bin" run "$work/bbs.toml" --until-drained \
        >"$work/worker.$w.log" 2>&1 &
      crawlers+=($!)
    done
    # One at a time: `wait` on several returns only the last one's status.
    for crawler in "${crawlers[@]}"; do wait "$crawler"; done
    t1=$(date +%s.%N)
    c1=$(redis_cpu)
    pages=$(redis-cli -p "$port" hget bbs:stats downloader/response_count)
    calls=$(script_calls)
    # The workers' CPU and context switches, summed.
    read -r usr sys vcs < <(cat "$work"/time.* | awk '{ u += $1; s += $2; v += $3 } END { print u, s, v }')
    printf '%s redis_us_per_page=%.1f calls_per_page=%.3f wall_s=%.2f worker_cpu_s=%.2f worker_switches=%s\n' \
      "$bin" "$(echo "($c1 - $c0) * 1000000 / $pages" | bc -l)" "$(echo "$calls / $pages" | bc -l)" \
      "$(echo "$t1 - $t0" | bc -l)" "$(echo "$usr + $sys" | bc -l)" "$vcs"
  done
done | tee "$work/runs.txt"

echo "== medians of $REPS runs"
for bin in "${builds[@]}"; do
  grep -F "$bin " "$work/runs.txt" | sed 's/.*redis_us_per_page=\([^ ]*\) calls_per_page=\([^ ]*\) .*worker_cpu_s=\([^ ]*\) .*/\1 \2 \3/' |
    awk -v bin="$bin" '{ r[NR] = $1; c[NR] = $2; w[NR] = $3 }
      function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      END { printf "%s: Redis CPU %.1f us/page, %.3f script calls/page, worker CPU %.2f s\n", bin, med(r, NR), med(c, NR), med(w, NR) }'
done
