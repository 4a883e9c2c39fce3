#!/usr/bin/env bash
# How crawl throughput grows with workers when the site, not the crawler,
# is the limit: the generated forum served with a fixed delay per response
# (crawlworker-demo serve --latency), crawled to the end by W = 1, 2, 4
# release-build workers sharing one Redis. Prints pages/s per W (medians of
# REPS runs) and the speed-up against W = 1. The tail of the crawl (when
# few requests are left) counts: the time runs from starting the workers to
# the last one exiting.
#
#   scripts/bench/scaling.sh                               # 18 forums x 50 pages (~10,500 pages), 20 ms, 3 runs
#   LATENCY=50ms REPS=1 WORKERS="1 4" scripts/bench/scaling.sh
#
# Needs redis-server and redis-cli. Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
LATENCY=${LATENCY:-20ms}
FORUMS=${FORUMS:-18}
PAGES=${PAGES:-50}
REPS=${REPS:-3}
WORKERS=${WORKERS:-"1 2 4"}
REDIS_PORT=${REDIS_PORT:-16490}
DEMO_PORT=${DEMO_PORT:-18711}

die() { echo "scaling.sh: $*" >&2; exit 1; }
command -v redis-server >/dev/null || die "needs redis-server"
for p in "$REDIS_PORT" "$DEMO_PORT"; do
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && die "port $p on 127.0.0.1 is taken"
done

cargo build --release --quiet -p crawlworker -p crawlworker-demo
bin=target/release/crawlworker
demo=target/release/crawlworker-demo
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --daemonize yes --logfile "$work/redis.log" >/dev/null
"$demo" serve --listen "127.0.0.1:$DEMO_PORT" --latency "$LATENCY" --forums "$FORUMS" --pages "$PAGES" \
  >"$work/demo.log" 2>&1 &
pids+=($!)
sleep 0.5
"$demo" tasks --forums "$FORUMS" --pages "$PAGES" >"$work/tasks.txt"
mapfile -t tasks <"$work/tasks.txt"
sed "s#127.0.0.1:8700#127.0.0.1:$DEMO_PORT#g" spiders/bbs.toml >"$work/bbs.toml"
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }

# One crawl by $1 workers; prints "pages seconds".
crawl() {
  rcli flushall >/dev/null
  rcli rpush bbs:start_urls "${tasks[@]}" >/dev/null
  local started ended ws=()
  started=$(date +%s.%N)
  for i in $(seq "$1"); do
    CRAWLWORKER_ROBOTSTXT_OBEY=false CRAWLWORKER_REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
      "$bin" run "$work/bbs.toml" --until-drained >"$work/worker.$i.log" 2>&1 &
    ws+=($!)
  done
  for w in "${ws[@]}"; do wait "$w" || die "a worker failed (see its log)"; done
  ended=$(date +%s.%N)
  echo "$(rcli hget bbs:stats downloader/response_count) $(echo "$ended - $started" | bc -l)"
}

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "| workers | pages | seconds (median of $REPS) | pages/s | speed-up vs 1 worker |"
echo "|---:|---:|---:|---:|---:|"
base=""
for w in $WORKERS; do
  rates=(); secs=(); pages=0
  for _ in $(seq "$REPS"); do
    read -r pages s < <(crawl "$w")
    secs+=("$s")
    rates+=("$(echo "$pages / $s" | bc -l)")
  done
  rate=$(printf '%s\n' "${rates[@]}" | median)
  sec=$(printf '%s\n' "${secs[@]}" | median)
  [ -n "$base" ] || base=$rate
  printf '| %s | %s | %.2f | %.0f | %.2f× |\n' "$w" "$pages" "$sec" "$rate" "$(echo "$rate / $base" | bc -l)"
done
echo "(latency $LATENCY per response, $FORUMS forums x $PAGES list pages; $(nproc) CPUs)"
