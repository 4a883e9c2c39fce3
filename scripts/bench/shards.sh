#!/usr/bin/env bash
# One spider over several shards: how the crawl's Redis CPU spreads over
# the masters of a Redis Cluster. Starts a cluster of SHARDS masters (no
# replicas, slots split evenly by redis-cli --cluster create) on
# 127.0.0.1, serves the generated forum SITES times on as many ports
# (SITES hosts, chosen so that each shard is home to as many), and crawls
# them to the end with W release-build workers and spiders/bbs.toml over
# SHARDS shards ([keys] mode = "cluster", robots.txt off). Then the same
# crawl unsharded (shards = 1), for the cost of sharding. Per run:
#
#   pages/s        pages over the time from starting the workers to the
#                  last one exiting
#   redis µs/page  all masters' CPU (INFO cpu, user + system) per page
#   busiest        the busiest master's share of that CPU (one master per
#                  shard: 1/SHARDS is an even spread)
#   per master     each master's CPU per page
#   calls/page     script calls per page, all masters
#
#   scripts/bench/shards.sh                         # 3 shards, 6 sites, 20 ms, W = 6
#   SHARDS=3 SITES=9 WORKERS=9 LATENCY=5ms scripts/bench/shards.sh
#   BIN=/tmp/crawlworker DEMO=/tmp/crawlworker-demo scripts/bench/shards.sh
#   PROFILE=1 scripts/bench/shards.sh               # and where the calls go
#   EXTRA=CRAWLWORKER_COMMIT_WAIT=60ms scripts/bench/shards.sh   # more settings for the workers
#
# PROFILE=1 logs every command in each master's slow log (threshold 0)
# and prints, after each run's line, the commands and script functions
# by calls per page and execution µs per page (the slow log's time: the
# command's own work, not reading and writing it). Logging costs Redis
# CPU itself: take the headline figures from a run without it.
#
# RECORD=DIR records what each master is sent (redis-cli MONITOR) to
# DIR/shards-N.PORT.mon for each run of N shards;
# scripts/bench/replay/commit_sizes.py then shows how many pages each
# commit call carried, per master and per worker.
#
# Needs redis-server, redis-cli, python3 and GNU time. Everything listens
# on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARDS=${SHARDS:-3}
SITES=${SITES:-6}
WORKERS=${WORKERS:-6}
LATENCY=${LATENCY:-20ms}
FORUMS=${FORUMS:-4}
PAGES=${PAGES:-30}
BASE_PORT=${BASE_PORT:-17400}
DEMO_FROM=${DEMO_FROM:-18800}

die() { echo "shards.sh: $*" >&2; exit 1; }
command -v redis-server >/dev/null || die "needs redis-server"
command -v python3 >/dev/null || die "needs python3"
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p crawlworker
  BIN=target/release/crawlworker
fi
if [ -z "${DEMO:-}" ]; then
  cargo build --release --quiet -p crawlworker-demo
  DEMO=target/release/crawlworker-demo
fi

work=$(mktemp -d)
pids=()
ports=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# The cluster: SHARDS masters.
nodes=()
for i in $(seq 0 $((SHARDS - 1))); do
  p=$((BASE_PORT + i))
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && die "port $p on 127.0.0.1 is taken"
  mkdir -p "$work/node$p"
  redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file "nodes.conf" \
    --save "" --appendonly no --dir "$work/node$p" --daemonize yes --logfile "$work/node$p/log" >/dev/null
  ports+=("$p")
  nodes+=("127.0.0.1:$p")
done
for p in "${ports[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$work/create.log" 2>&1 ||
  die "cannot create the cluster (see $work/create.log)"
for _ in $(seq 100); do
  redis-cli -p "${ports[0]}" cluster info | grep -q cluster_state:ok && break
  sleep 0.1
done
url="redis+cluster://$(IFS=,; echo "${nodes[*]}")"

# The sites: ports whose hosts spread evenly over the shards (the shard is
# the SHA-1 of host:port, as frontier::shards::shard_of_host).
site_ports=$(python3 - "$SHARDS" "$SITES" "$DEMO_FROM" <<'EOF'
import hashlib, sys
shards, sites, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
want, chosen = {s: sites // shards + (1 if s < sites % shards else 0) for s in range(shards)}, []
while len(chosen) < sites:
    s = int.from_bytes(hashlib.sha1(f"127.0.0.1:{port}".encode()).digest()[:8], "big") % shards
    if want[s] > 0:
        want[s] -= 1
        chosen.append(port)
    port += 1
print(" ".join(map(str, chosen)))
EOF
)
for p in $site_ports; do
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && die "port $p on 127.0.0.1 is taken"
  "$DEMO" serve --listen "127.0.0.1:$p" --latency "$LATENCY" --forums "$FORUMS" --pages "$PAGES" \
    >"$work/demo.$p.log" 2>&1 &
  pids+=($!)
done
"$DEMO" tasks --forums "$FORUMS" --pages "$PAGES" >"$work/tasks.txt"
tasks=()
for p in $site_ports; do
  while read -r task; do tasks+=("${task%\}},\"port\":\"$p\"}"); done <"$work/tasks.txt"
done

# The spider over $1 shards.
spider_for() {
  sed -e 's#http://127.0.0.1:8700/list/{forum_id}/1#http://127.0.0.1:{port}/list/{forum_id}/1#' \
    -e 's#task_fields = \["forum_id", "max_page"\]#task_fields = ["forum_id", "max_page", "port"]#' \
    -e "0,/^\[start\]/s//[keys]\nmode = \"cluster\"\nshards = $1\n\n[start]/" \
    spiders/bbs.toml >"$work/bbs.$1.toml"
  echo "$work/bbs.$1.toml"
}

cpu_of() { redis-cli -p "$1" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'; }
calls_of() {
  redis-cli -p "$1" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_(eval|evalsha|fcall):/ { s += $3 } END { print s + 0 }'
}

# One crawl with spider $1; prints the run's figures.
crawl() {
  local spider=$1 c0=() c1=() ws=() started ended
  for p in "${ports[@]}"; do
    redis-cli -p "$p" flushall >/dev/null
    redis-cli -p "$p" config resetstat >/dev/null
    if [ -n "${PROFILE:-}" ]; then
      redis-cli -p "$p" config set slowlog-max-len 4000000 >/dev/null
      redis-cli -p "$p" config set slowlog-log-slower-than 0 >/dev/null
      redis-cli -p "$p" slowlog reset >/dev/null
    fi
  done
  local monitors=()
  if [ -n "${RECORD:-}" ]; then
    mkdir -p "$RECORD"
    for p in "${ports[@]}"; do
      # Loaded again while recorded, for the tools that read it.
      redis-cli -p "$p" function flush >/dev/null
      redis-cli -p "$p" monitor >"$RECORD/shards-$SHARDS.$p.mon" &
      monitors+=($!)
    done
    sleep 0.3
  fi
  CRAWLWORKER_REDIS_URL="$url" "$BIN" push-urls "$spider" "${tasks[@]}" >/dev/null 2>"$work/push.log" ||
    die "push-urls failed (see $work/push.log)"
  for p in "${ports[@]}"; do c0+=("$(cpu_of "$p")"); done
  started=$(date +%s.%N)
  for i in $(seq "$WORKERS"); do
    # shellcheck disable=SC2086
    env CRAWLWORKER_ROBOTSTXT_OBEY=false ${EXTRA:-} CRAWLWORKER_REDIS_URL="$url" \
      "$BIN" run "$spider" --until-drained >"$work/worker.$i.log" 2>&1 &
    ws+=($!)
  done
  for w in "${ws[@]}"; do wait "$w" || die "a worker failed (see $work/worker.*.log)"; done
  ended=$(date +%s.%N)
  if [ ${#monitors[@]} -gt 0 ]; then
    sleep 0.3
    kill "${monitors[@]}"
  fi
  for p in "${ports[@]}"; do c1+=("$(cpu_of "$p")"); done
  local pages=0 calls=0 total=0 busiest=0 each=""
  for s in $(seq 0 $((SHARDS - 1))); do
    n=$(redis-cli -c -p "${ports[0]}" hget "$(key_of "$s" stats)" downloader/response_count)
    pages=$((pages + ${n:-0}))
  done
  for i in "${!ports[@]}"; do
    d=$(echo "${c1[$i]} - ${c0[$i]}" | bc -l)
    total=$(echo "$total + $d" | bc -l)
    busiest=$(echo "if ($d > $busiest) $d else $busiest" | bc -l)
    calls=$((calls + $(calls_of "${ports[$i]}")))
    each="$each $(printf '%.1f' "$(echo "$d * 1000000 / $pages" | bc -l)")"
  done
  if [ -n "${PROFILE:-}" ]; then
    for p in "${ports[@]}"; do
      redis-cli -p "$p" config set slowlog-log-slower-than -1 >/dev/null
      redis-cli -p "$p" --json slowlog get -1 >"$work/slowlog.$p.json"
    done
    profile "$pages" "$work"/slowlog.*.json >"$work/profile.txt"
  fi
  printf '%s | %.0f | %.1f | %.0f %% |%s | %.3f\n' "$pages" \
    "$(echo "$pages / ($ended - $started)" | bc -l)" "$(echo "$total * 1000000 / $pages" | bc -l)" \
    "$(echo "$busiest * 100 / $total" | bc -l)" "$each" "$(echo "$calls / $pages" | bc -l)"
}

# The key of kind $2 on shard $1 of spider bbs over $SHARDS shards (the
# shard names of frontier::shards::shard_name).
key_of() {
  python3 - "$1" "$SHARDS" "$2" <<'EOF'
import sys
shard, shards, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc
slot = lambda tag: crc16(tag.encode()) % 16384
def name(n, s, count):
    if s == 0 or count <= 1:
        return n
    rng = lambda x: x * count // 16384
    own = rng(slot(n))
    target = [r for r in range(count) if r != own][s - 1]
    if rng(slot(f"{n}.{s}")) == target:
        return f"{n}.{s}"
    k = 1
    while rng(slot(f"{n}.{s}.{k}")) != target:
        k += 1
    return f"{n}.{s}.{k}"
print("{%s}:%s" % (name("bbs", shard, shards), kind))
EOF
}

# The slow logs $2… of a crawl of $1 pages, by command (a script call by
# its function): calls and execution µs per page, the most costly first.
profile() {
  python3 - "$@" <<'EOF'
import json, sys
pages, by = int(sys.argv[1]), {}
for path in sys.argv[2:]:
    for entry in json.load(open(path, encoding="utf-8", errors="replace")):
        args = entry[3]
        name = args[0].lower()
        if name in ("fcall", "fcall_ro", "evalsha") and len(args) > 1:
            name = f"{name} {args[1]}"
        calls, micros = by.get(name, (0, 0))
        by[name] = (calls + 1, micros + entry[2])
for name, (calls, micros) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"    {name:<40} {calls / pages:8.3f} calls/page {micros / pages:8.1f} µs/page")
EOF
}

# After a run's line, its profile (PROFILE=1).
show_profile() {
  [ -n "${PROFILE:-}" ] && cat "$work/profile.txt"
  return 0
}

echo "# $BIN; $SHARDS masters, $SITES sites (ports $site_ports) × $FORUMS forums × $PAGES list pages, $LATENCY, $WORKERS workers; $(nproc) CPUs"
echo "| spider | pages | pages/s | redis µs/page | busiest master | µs/page per master | calls/page |"
echo "|---|---:|---:|---:|---:|---|---:|"
echo "| shards = $SHARDS | $(crawl "$(spider_for "$SHARDS")") |"
show_profile
saved=$SHARDS
SHARDS=1
echo "| shards = 1 | $(crawl "$(spider_for 1)") |"
show_profile
SHARDS=$saved
