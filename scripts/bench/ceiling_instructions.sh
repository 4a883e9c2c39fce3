#!/usr/bin/env bash
# Redis instructions per page in the ceiling benchmark (benches/ceiling.rs),
# counted by valgrind's callgrind: unlike CPU time, the count does not
# depend on what else the machine is doing, so two revisions can be
# compared on a busy machine. Only the work of serving clients is counted
# (reading, parsing and running commands, writing replies), not start-up
# or the server's cron.
#
#     REDIS_SERVER=~/redis-7.0.15/src/redis-server scripts/bench/ceiling_instructions.sh
#     CEILING_CONNECTIONS=4 CEILING_SECONDS=20 REDIS_SERVER=... scripts/bench/ceiling_instructions.sh
#
# REDIS_SERVER must be a redis-server with its symbols (Debian's is
# stripped): `make` in a checkout of redis gives one in src/. Under
# callgrind Redis runs ~50x slower, so pages per script call are larger
# than on a real run; compare revisions at the same pages per call (the
# script prints it) and the same number of connections.
set -euo pipefail
cd "$(dirname "$0")/../.."
server=${REDIS_SERVER:?set REDIS_SERVER to a redis-server built with symbols (make in a redis checkout)}
connections=${CEILING_CONNECTIONS:-16}
seconds=${CEILING_SECONDS:-20}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
nm "$server" 2>/dev/null | grep readQueryFromClient >/dev/null ||
  { echo "$server has no symbols: callgrind could not tell serving clients from the rest" >&2; exit 1; }

work=$(mktemp -d)
trap 'pkill -TERM -f "callgrind-out-file=$work/" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir "$work/bin"
# The benchmark starts `redis-server` from PATH and kills it when a run
# ends; this one outlives that kill so that it can be read, then stopped
# with SIGTERM, when callgrind writes its counts.
cat >"$work/bin/redis-server" <<EOF
#!/usr/bin/env bash
valgrind --tool=callgrind --collect-atstart=no \
  --toggle-collect=readQueryFromClient \
  --toggle-collect=handleClientsWithPendingWritesUsingThreads \
  --callgrind-out-file=$work/callgrind.%p "$server" "\$@" </dev/null >/dev/null 2>&1 &
wait
EOF
chmod +x "$work/bin/redis-server"

bench=$(cargo bench --bench ceiling --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*ceiling[^"]*\)".*/\1/p' | tail -1)
row=$(PATH="$work/bin:$PATH" CEILING_CONNECTIONS=$connections CEILING_SECONDS=$seconds CEILING_REPS=1 \
  "$bench" --bench | grep -E '^\| [0-9]')
pid=$(pgrep -f "callgrind-out-file=$work/" | head -1)
port=$(tr '\0' ' ' </proc/"$pid"/cmdline | grep -o -- '--port [0-9]*' | awk '{print $2}')
pages=$(redis-cli -p "$port" hget ceiling:stats response_received_count)
calls=$(redis-cli -p "$port" info commandstats | grep -E '^cmdstat_(eval(sha)?|fcall):' |
  sed 's/^[^:]*:calls=\([0-9]*\).*/\1/' | paste -sd+ | bc)
kill -TERM "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.5; done
callgrind_annotate "$work"/callgrind.* >"$work/annotated" 2>/dev/null
total=$(grep 'PROGRAM TOTALS' "$work/annotated" | head -1 | awk '{print $1}' | tr -d ,)
echo "benchmark row (under callgrind): $row"
echo "connections=$connections pages=$pages script_calls=$calls pages_per_call=$(echo "scale=1; $pages / $calls" | bc)"
echo "Redis instructions per page: $((total / pages))"
