#!/usr/bin/env bash
# Many workers, one crawl: what each worker count costs per page. The
# generated forum is served with a fixed delay per response
# (crawlworker-demo serve --latency), so the site, not the crawler, is the
# limit, and crawled to the end by W release-build workers sharing one
# Redis (spiders/bbs.toml: 16 downloads per worker, 8 per host, robots.txt
# off). Per run it prints:
#
#   pages/s             pages over the time from starting the workers to the
#                       last one exiting (the crawl's tail counts)
#   calls/page          script calls Redis ran (EVAL, EVALSHA, FCALL in
#                       INFO commandstats) per page
#   redis µs/page       Redis CPU (INFO cpu, user + system) per page
#   redis core          Redis CPU over wall time (share of one core)
#   worker µs/page      the workers' CPU (GNU time, user + system, summed)
#   lease share         the largest share of the crawl's leases one worker
#                       held, sampled every SAMPLE seconds from the lease
#                       owners hash (samples with fewer leases than workers
#                       are left out), and that as a multiple of the fair
#                       share (1/W); "idle" when another worker of the
#                       crawl's crew (those that leased or committed
#                       within a lease) held none at that moment; and the
#                       samples in which a worker held over twice its fair
#                       share of the crew while another of the crew held
#                       none, of the samples judged. A worker still
#                       starting, not yet in the crew, is not idle: the
#                       first to lease may take the start pages before
#                       the others have joined.
#   held back           of those unfair samples, the ones in which that
#                       worker held more leases than it can download at
#                       once (its concurrent_requests_per_domain, or its
#                       concurrent_requests if fewer: every forum is on
#                       the one demo host), so that some of
#                       them waited for its slots while another worker
#                       had nothing. The rest are downloads in progress:
#                       at the end of a crawl, with fewer pages left than
#                       the workers could fetch at once, those that
#                       leased them a moment earlier are still fetching
#                       while the others have run out, and nobody waits.
#
# then the medians of REPS runs per worker count. On a shared machine CPU
# times move with the load (printed beside every run); the counts (calls
# per page, lease shares) do not.
#
#   scripts/bench/scaling.sh                                        # narrow crawl: 4 forums, 100 ms, W = 1 4 16
#   FORUMS=18 WORKERS="4 16" REPS=1 scripts/bench/scaling.sh        # wide crawl
#   BIN=/tmp/old-crawlworker scripts/bench/scaling.sh               # another build
#   DEMO=/tmp/crawlworker-demo ...                                  # a demo server already built
#   COMMANDSTATS=/tmp/stats ...       # also keep each run's INFO commandstats (W.N.txt, by usec)
#                                     # and its lease samples (W.N.leases: total largest holders crew)
#
# Needs redis-server, redis-cli and GNU time. Everything listens on
# 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
LATENCY=${LATENCY:-100ms}
FORUMS=${FORUMS:-4}
PAGES=${PAGES:-50}
REPS=${REPS:-3}
WORKERS=${WORKERS:-"1 4 16"}
SAMPLE=${SAMPLE:-0.2}
REDIS_PORT=${REDIS_PORT:-16490}
DEMO_PORT=${DEMO_PORT:-18711}

die() { echo "scaling.sh: $*" >&2; exit 1; }
command -v redis-server >/dev/null || die "needs redis-server"
[ -x /usr/bin/time ] || die "needs GNU time at /usr/bin/time (apt-get install time)"
for p in "$REDIS_PORT" "$DEMO_PORT"; do
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && die "port $p on 127.0.0.1 is taken"
done

if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p crawlworker
  BIN=target/release/crawlworker
fi
if [ -z "${DEMO:-}" ]; then
  cargo build --release --quiet -p crawlworker-demo
  DEMO=target/release/crawlworker-demo
fi
demo=$DEMO
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
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$demo" tasks --forums "$FORUMS" --pages "$PAGES" >"$work/tasks.txt"
mapfile -t tasks <"$work/tasks.txt"
sed "s#127.0.0.1:8700#127.0.0.1:$DEMO_PORT#g" "${SPIDER:-spiders/bbs.toml}" >"$work/bbs.toml"
# What one worker can download at once from the one demo host: its slots
# for a host, or all its slots if fewer.
setting() { sed -n "s/^$1 *= *\([0-9]*\).*/\1/p" "$work/bbs.toml"; }
per_host=$(setting concurrent_requests_per_domain)
slots=$(setting concurrent_requests)
[ -n "$per_host" ] && [ -n "$slots" ] ||
  die "spiders/bbs.toml sets no concurrent_requests or concurrent_requests_per_domain"
can_start=$((per_host < slots ? per_host : slots))
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }

redis_cpu() {
  rcli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'
}
script_calls() {
  rcli info commandstats | tr -d '\r' | grep -E '^cmdstat_(eval(sha)?|fcall):' |
    sed 's/^[^:]*:calls=\([0-9]*\).*/\1/' | paste -sd+ | bc
}

# Samples the lease owners until $work/stop exists; one line per sample:
# "total largest holders crew" (leases, the most one worker held, workers
# holding any, workers in the crew; the crew is read first, so a worker
# joining between the two reads is not taken for an idle one).
sample_leases() {
  local crew
  while [ ! -e "$work/stop" ]; do
    crew=$(rcli zcard bbs:inflight:workers 2>/dev/null || echo 0)
    # Fields and values alternate; the `~` field is a note, not a lease.
    rcli hgetall bbs:inflight:owners 2>/dev/null | awk 'NR % 2 == 1 { f = $0 } NR % 2 == 0 && f != "~"' |
      sed 's/|[^|]*$//' | sort | uniq -c |
      awk -v c="$crew" '{ t += $1; if ($1 > m) m = $1; n++ } END { if (t > 0) print t, m, n, (c > n ? c : n) }'
    sleep "$SAMPLE"
  done
}

# One crawl by $1 workers; prints the run's figures (see the header).
crawl() {
  local w=$1 started ended c0 c1 ws=() load kept=""
  rcli flushall >/dev/null
  rcli rpush bbs:start_urls "${tasks[@]}" >/dev/null
  rcli config resetstat >/dev/null
  load=$(cut -d' ' -f1 /proc/loadavg)
  # The last run's timings go: a run of fewer workers would add them up.
  rm -f "$work/stop" "$work"/time.*
  sample_leases >"$work/leases" &
  local sampler=$!
  c0=$(redis_cpu)
  local split0
  split0=$(rcli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { printf "%s ", $2 }')
  started=$(date +%s.%N)
  for i in $(seq "$w"); do
    CRAWLWORKER_ROBOTSTXT_OBEY=false CRAWLWORKER_REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
      /usr/bin/time -f "%U %S" -o "$work/time.$i" "$BIN" run "$work/bbs.toml" --until-drained \
      >"$work/worker.$i.log" 2>&1 &
    ws+=($!)
  done
  for p in "${ws[@]}"; do wait "$p" || die "a worker failed (see $work/worker.*.log)"; done
  ended=$(date +%s.%N)
  c1=$(redis_cpu)
  if [ -n "${COMMANDSTATS:-}" ]; then
    mkdir -p "$COMMANDSTATS"
    local n=1
    while [ -e "$COMMANDSTATS/$w.$n.txt" ]; do n=$((n + 1)); done
    rcli info commandstats | tr -d '\r' | grep '^cmdstat_' |
      sed 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),usec=\([0-9]*\).*/\3 \2 \1/' | sort -rn >"$COMMANDSTATS/$w.$n.txt"
    kept="$COMMANDSTATS/$w.$n"
    # Redis CPU seconds (sys user) before and after, to tell the kernel's part.
    echo "# cpu sys user: $split0-> $(rcli info cpu | tr -d '\r' |
      awk -F: '/^used_cpu_(sys|user):/ { printf "%s ", $2 }')" >>"$COMMANDSTATS/$w.$n.txt"
  fi
  touch "$work/stop"
  wait "$sampler"
  [ -z "$kept" ] || cp "$work/leases" "$kept.leases"
  local pages calls wcpu wall share
  pages=$(rcli hget bbs:stats downloader/response_count)
  calls=$(script_calls)
  wcpu=$(cat "$work"/time.* | awk '{ s += $1 + $2 } END { printf "%.3f", s }')
  wall=$(echo "$ended - $started" | bc -l)
  # The largest share, among samples with at least as many leases as workers.
  # And how many samples broke the rule: one worker over twice its fair
  # share of the crew while another of the crew held none; and of those,
  # how many with that worker holding more than it can download at once.
  share=$(awk -v w="$w" -v can="$can_start" '$1 >= w { n++; s = $2 / $1; if (s > best) { best = s; idle = ($3 < $4) }
      if ($2 * $4 > 2 * $1 && $3 < $4) { bad++; if ($2 > can) back++ } }
    END { printf "%.2f %.2f %s %d/%d %d", best, best * w, (idle ? "idle" : "-"), bad, n, back }' "$work/leases")
  printf '%s %s %.3f %.1f %.2f %.1f %s %s\n' "$pages" \
    "$(echo "$pages / $wall" | bc -l)" "$(echo "$calls / $pages" | bc -l)" \
    "$(echo "($c1 - $c0) * 1000000 / $pages" | bc -l)" "$(echo "($c1 - $c0) / $wall" | bc -l)" \
    "$(echo "$wcpu * 1000000 / $pages" | bc -l)" "$share" "$load"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

echo "# $BIN; latency $LATENCY, $FORUMS forums x $PAGES list pages; $(nproc) CPUs"
echo "| workers | pages | pages/s | calls/page | redis µs/page | redis core | worker µs/page | lease share | × fair | another idle | unfair samples | held back | load |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"
for w in $WORKERS; do
  : >"$work/runs"
  for _ in $(seq "$REPS"); do
    line=$(crawl "$w")
    echo "$line" >>"$work/runs"
    read -r pages rate calls rus core wus share fair idle bad back load <<<"$line"
    printf '| %s | %s | %.0f | %s | %s | %.0f %% | %s | %.0f %% | %s | %s | %s | %s | %s |\n' \
      "$w" "$pages" "$rate" "$calls" "$rus" "$(echo "$core * 100" | bc -l)" "$wus" \
      "$(echo "$share * 100" | bc -l)" "$fair" "$idle" "$bad" "$back" "$load"
  done
  if [ "$REPS" -gt 1 ]; then
    col() { awk -v c="$1" '{ print $c }' "$work/runs" | median; }
    printf '| **%s, median** | | %.0f | %s | %s | %.0f %% | %s | %.0f %% | %s | | | | |\n' "$w" \
      "$(col 2)" "$(col 3)" "$(col 4)" "$(echo "$(col 5) * 100" | bc -l)" "$(col 6)" \
      "$(echo "$(col 7) * 100" | bc -l)" "$(col 8)"
  fi
done
