#!/usr/bin/env bash
# A split pipeline's Redis cost per page as its downstream spider's
# workers grow: spiders/bbs-list.toml hands every thread to
# spiders/bbs-detail.toml (to_spider), on the demo forum served on
# 127.0.0.1 with LATENCY per response. For each count in DETAIL, that
# many bbs-detail workers start idle, then one bbs-list worker crawls the
# forum's lists; every worker runs --until-drained. Per run: pages of
# both spiders, items, script calls (FCALL, EVALSHA) per page, and the
# start key watches Redis served (BLMOVE).
#
#   scripts/bench/pipeline.sh                      # DETAIL="1 8", 20 ms, 2 rounds
#   DETAIL="1 4 16" LATENCY=5ms ROUNDS=3 scripts/bench/pipeline.sh
#   BIN=/tmp/crawlworker scripts/bench/pipeline.sh
#   SIZE="--forums 4 --pages 50" scripts/bench/pipeline.sh   # a larger forum (demo size flags)
#   LIST_SHARDS=3 scripts/bench/pipeline.sh        # bbs-list over three shards
#
# Needs redis-server, redis-cli and python3. Everything listens on
# 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
DETAIL=${DETAIL:-"1 8"}
LATENCY=${LATENCY:-20ms}
ROUNDS=${ROUNDS:-2}
port=${REDIS_PORT:-16651}
demo_port=${DEMO_PORT:-18751}
SIZE=${SIZE:-}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=target/release/crawlworker
fi
. scripts/bench/forum_setup.sh
forum_work
SERVE="--latency $LATENCY" forum_site
for spider in bbs-list bbs-detail; do
  sed "s#127.0.0.1:8700#127.0.0.1:$demo_port#g" "spiders/$spider.toml" >"$work/$spider.toml"
done
# LIST_SHARDS: bbs-list over that many shards (its tasks then go through
# hand-off outboxes, see docs/scaling.md).
if [ "${LIST_SHARDS:-1}" -gt 1 ]; then
  printf '\n[keys]\nshards = %s\n' "$LIST_SHARDS" >>"$work/bbs-list.toml"
fi
url=redis://127.0.0.1:$port

one_run() {
  local n=$1 detail=()
  forum_redis redis-server
  "$BIN" push-urls "$work/bbs-list.toml" --redis "$url" "${tasks[@]}" >/dev/null 2>&1
  for _ in $(seq "$n"); do
    "$BIN" run "$work/bbs-detail.toml" --redis "$url" --until-drained -q >/dev/null 2>&1 &
    detail+=($!)
  done
  sleep 1 # the detail workers idle, watching their start key
  redis-cli -p "$port" config resetstat >/dev/null
  "$BIN" run "$work/bbs-list.toml" --redis "$url" --until-drained -q >/dev/null 2>&1
  for p in "${detail[@]}"; do wait "$p"; done
  python3 - "$n" "$port" <<'PY'
import subprocess, sys
n, port = sys.argv[1], sys.argv[2]
def r(*a):
    return subprocess.run(['redis-cli', '-p', port, *a], capture_output=True, text=True).stdout.strip()
calls = {}
for line in r('info', 'commandstats').splitlines():
    if line.startswith('cmdstat_'):
        name, rest = line[len('cmdstat_'):].split(':', 1)
        calls[name] = int(rest.split(',')[0].split('=')[1])
def pages_of(spider):
    # A sharded spider's shards each have their stats hash.
    keys = [k for k in r('--scan', '--pattern', f'{spider}*:stats').split() if k.count(':') == 1]
    return sum(int(r('hget', k, 'response_received_count') or 0) for k in keys)
pages = [pages_of(s) for s in ('bbs-list', 'bbs-detail')]
scripts = calls.get('fcall', 0) + calls.get('evalsha', 0)
print(f"| {n} | {pages[0]} + {pages[1]} | {r('llen', 'bbs-detail:items')} | {scripts} | "
      f"{scripts / max(1, sum(pages)):.2f} | {calls.get('blmove', 0)} |")
PY
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$redis_pid" 2>/dev/null || true
}

echo "| detail workers | pages (list + detail) | items | script calls | calls/page | BLMOVE served |"
echo "|---:|---|---:|---:|---:|---:|"
for _ in $(seq "$ROUNDS"); do
  for n in $DETAIL; do one_run "$n"; done
done
