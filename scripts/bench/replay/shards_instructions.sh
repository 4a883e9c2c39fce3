#!/usr/bin/env bash
# Redis instructions per page of a sharded crawl and the same crawl
# unsharded, recorded by scripts/bench/shards.sh (RECORD=DIR) and each
# master's recording replayed into a Redis of its own under valgrind's
# callgrind. CPU time per page on a machine whose masters share its cores
# with the workers moves with what else runs: a command costs more on a
# master that is switched out between calls than on one kept busy. The
# instruction count does not.
#
#     RECORD=/tmp/sh BIN=… scripts/bench/shards.sh
#     REDIS_SERVER=/tmp/redis-7.0.15/src/redis-server scripts/bench/replay/shards_instructions.sh /tmp/sh
#
# Prints, for each shard count recorded (shards-N.PORT.mon), the pages,
# the script calls, the instructions of the script calls (FCALL,
# inclusive) and of all Redis did serving clients, per page, over every
# master. Scripts read the recording's clock (REPLAY_CLOCK=recorded, see
# replay.py), so that leases and crew places expire as they did.
#
# REDIS_SERVER: a redis-server built with symbols (`make MALLOC=libc` in
# a redis checkout), so that the script calls can be told apart.
set -euo pipefail
dir=$(realpath "${1:?usage: shards_instructions.sh RECORD_DIR}")
port=${REDIS_PORT:-16622}
cd "$(dirname "$0")/../../.."
. scripts/bench/forum_setup.sh
callgrind_server
forum_work
export REPLAY_CLOCK=recorded

# Replays recording $1; adds its pages, script calls, script
# instructions and instructions serving clients to pages, calls, scripts
# and total.
replay_one() {
  local out="$work/callgrind.$(basename "$1")"
  forum_redis valgrind --tool=callgrind --collect-atstart=no \
    --toggle-collect=readQueryFromClient --toggle-collect=handleClientsWithPendingWritesUsingThreads \
    --callgrind-out-file="$out" "$server"
  python3 scripts/bench/replay/replay.py "$1" "$port" 2>"$work/replay.log" ||
    { cat "$work/replay.log" >&2; exit 1; }
  # How many commands it sent, and how many failed (a cluster client's
  # CLUSTER commands do, on a Redis without cluster support).
  echo "$(basename "$1"): $(tail -1 "$work/replay.log")" >&2
  local key n
  for key in $(redis-cli -p "$port" --scan --pattern '*:stats'); do
    n=$(redis-cli -p "$port" hget "$key" downloader/response_count)
    pages=$((pages + ${n:-0}))
  done
  n=$(script_calls || true)
  calls=$((calls + ${n:-0}))
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$redis_pid" || true
  local all fcall
  read -r all fcall < <(callgrind_counts "$out")
  total=$((total + all)) scripts=$((scripts + fcall))
}

echo "| shards | pages | script calls per page | script instructions per page | instructions per page, serving clients |"
echo "|---:|---:|---:|---:|---:|"
for n in $(ls "$dir" | sed -n 's/^shards-\([0-9]*\)\..*\.mon$/\1/p' | sort -un); do
  pages=0 calls=0 scripts=0 total=0
  for rec in "$dir"/shards-"$n".*.mon; do
    replay_one "$rec"
  done
  [ "$pages" -gt 0 ] || { echo "shards-$n: no pages counted in the replays" >&2; exit 1; }
  printf '| %s | %s | %.3f | %s | %s |\n' "$n" "$pages" "$(echo "$calls / $pages" | bc -l)" \
    "$((scripts / pages))" "$((total / pages))"
done
