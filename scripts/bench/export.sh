#!/usr/bin/env bash
# crawlworker export into PostgreSQL: items per second per exporter and
# the exporter's CPU per item. ITEMS comment items of spiders/bbs.toml
# (about 300 bytes each, unique comment_id) are pushed to bbs:items; then
# N exporters (for each N in EXPORTERS) run `export --to postgres://…
# --until-drained` from a fresh table, and the run is timed. Per run: wall
# seconds, items/s in all and per exporter, the exporters' CPU (user+sys)
# per item, and the rows counted after (must equal ITEMS). The medians of
# ROUNDS runs are printed last.
#
#   scripts/bench/export.sh                         # 100000 items, EXPORTERS="1 2", 3 rounds
#   ITEMS=20000 EXPORTERS="1 2 4" BATCH=1000 scripts/bench/export.sh
#   BIN=/tmp/crawlworker scripts/bench/export.sh
#
# Needs redis-server, python3, /usr/bin/time and PostgreSQL's packaged
# server (apt-get install postgresql); run as root, the server runs as
# nobody. Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
ITEMS=${ITEMS:-100000}
EXPORTERS=${EXPORTERS:-"1 2"}
BATCH=${BATCH:-500}
ROUNDS=${ROUNDS:-3}
port=${REDIS_PORT:-16661}
pg_port=${PG_PORT:-16662}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p crawlworker
  BIN=target/release/crawlworker
fi
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
work=$(mktemp -d)
as_pg=()
if [ "$(id -u)" = 0 ]; then
  as_pg=(setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env --)
  chown nobody:nogroup "$work"
fi
cleanup() {
  [ -n "${pg_pid:-}" ] && kill -INT "$pg_pid" 2>/dev/null && wait "$pg_pid" 2>/dev/null
  [ -n "${redis_pid:-}" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"${as_pg[@]}" "$pgbin/initdb" -D "$work/pg" -U postgres --auth=trust --no-sync -E UTF8 --locale=C >/dev/null
"${as_pg[@]}" "$pgbin/postgres" -D "$work/pg" -p "$pg_port" -c listen_addresses=127.0.0.1 \
  -c unix_socket_directories="$work" -c fsync=off -c synchronous_commit=off >"$work/pg.log" 2>&1 &
pg_pid=$!
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
redis_pid=$!
until "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pg_port"; do sleep 0.1; done
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
pg_url="postgres://postgres@127.0.0.1:$pg_port/postgres"
psql_do() { PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -q -At "$pg_url" -c "$1"; }

# The items, as the Redis protocol, made once.
python3 - "$ITEMS" >"$work/items.resp" <<'EOF'
import json, sys
n = int(sys.argv[1])
out = sys.stdout.buffer
def cmd(*args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        b = a.encode()
        out.write(b"$%d\r\n%s\r\n" % (len(b), b))
batch = []
for i in range(n):
    batch.append(json.dumps({"kind": "comment", "comment_id": "c%08d" % i, "post_id": 1000 + i // 20,
        "forum_id": "00001", "user": "user%d" % (i % 997), "floor": i % 20 + 1,
        "text": "A comment of some length, as forums have them: %d " % i + "lorem ipsum " * 12}))
    if len(batch) == 1000 or i == n - 1:
        cmd("RPUSH", "bbs:items", *batch)
        batch = []
EOF

echo "exporters rounds wall_s items_per_s per_exporter_items_per_s cpu_us_per_item rows"
results=()
for n in $EXPORTERS; do
  for round in $(seq "$ROUNDS"); do
    redis-cli -p "$port" flushall >/dev/null
    psql_do "DROP TABLE IF EXISTS bbs_comment, bbs_post"
    redis-cli -p "$port" --pipe <"$work/items.resp" >/dev/null
    # Tables first, so the runs time the export alone.
    "$BIN" export spiders/bbs.toml --redis "redis://127.0.0.1:$port" --to "$pg_url" --create --print-schema |
      "$pgbin/psql" -q "$pg_url" >/dev/null
    start=$(date +%s.%N)
    pids=()
    for i in $(seq "$n"); do
      /usr/bin/time -f "%U %S" -o "$work/time.$i" "$BIN" -q export spiders/bbs.toml \
        --redis "redis://127.0.0.1:$port" --to "$pg_url" --batch "$BATCH" --until-drained &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    end=$(date +%s.%N)
    cpu=$(cat "$work"/time.* | awk '{s += $1 + $2} END {print s}')
    rm -f "$work"/time.*
    rows=$(psql_do "SELECT count(*) FROM bbs_comment")
    line=$(awk -v n="$n" -v r="$round" -v s="$start" -v e="$end" -v c="$cpu" -v items="$ITEMS" -v rows="$rows" \
      'BEGIN { w = e - s; printf "%d %d %.2f %.0f %.0f %.1f %d", n, r, w, items / w, items / w / n, c / items * 1e6, rows }')
    echo "$line"
    results+=("$line")
  done
done
echo
echo "medians: exporters items_per_s per_exporter_items_per_s cpu_us_per_item"
for n in $EXPORTERS; do
  printf '%s\n' "${results[@]}" | awk -v n="$n" '$1 == n' | sort -k4 -n |
    awk '{ a[NR] = $0 } END { split(a[int((NR + 1) / 2)], f, " "); print f[1], f[4], f[5], f[6] }'
done
