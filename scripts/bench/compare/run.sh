#!/usr/bin/env bash
# crawlworker vs scrapy-redis on the same generated forum, in the same run.
# See scripts/bench/compare/README.md. Everything listens on 127.0.0.1 only.
#
#     scripts/bench/compare/run.sh
#     REPS=1 WORKERS="1" scripts/bench/compare/run.sh          # quicker
#
# Knobs (environment): FORUMS, PAGES (site size), PAGE_KB (KiB of page
# chrome, menus, sidebar, style and script, added to every HTML page so
# pages weigh what a real forum's do; 0: the bare ~1 KiB demo pages),
# REPS (runs per side and
# worker count), WORKERS (worker counts, e.g. "1 2"), MONITOR (1: one extra
# 1-worker run per side under MONITOR to split client commands from script
# commands), RSTATS (1: one extra 1-worker scrapy-redis run with its
# RedisStatsCollector), BIN (the crawlworker to run, e.g. the
# profile-guided target/pgo/release/crawlworker that scripts/build-pgo
# makes; default: this checkout's release build, built now), REDIS_PORT,
# DEMO_PORT, PYTHON (a python with
# scrapy + scrapy-redis; created as /tmp/srvenv if missing), OUT (where raw
# results go; default /tmp/crawlworker-compare, replaced on each run).
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
here=$root/scripts/bench/compare

FORUMS=${FORUMS:-12}
PAGES=${PAGES:-50}
PAGE_KB=${PAGE_KB:-0}
REPS=${REPS:-3}
WORKERS=${WORKERS:-"1 2"}
MONITOR=${MONITOR:-1}
RSTATS=${RSTATS:-1}
REDIS_PORT=${REDIS_PORT:-16480}
DEMO_PORT=${DEMO_PORT:-18701}
OUT=${OUT:-/tmp/crawlworker-compare}
VENV=/tmp/srvenv
PYTHON=${PYTHON:-$VENV/bin/python}
SCRAPY_VERSION=${SCRAPY_VERSION:-2.13.4}
SCRAPY_REDIS_VERSION=${SCRAPY_REDIS_VERSION:-0.9.1}

die() { echo "run.sh: $*" >&2; exit 1; }
[ -x /usr/bin/time ] || die "needs GNU time at /usr/bin/time (apt-get install time)"
command -v redis-server >/dev/null || die "needs redis-server (apt-get install redis-server)"
command -v redis-cli >/dev/null || die "needs redis-cli"

# Python side: a venv with pinned scrapy and scrapy-redis.
if ! "$PYTHON" -c 'import scrapy, scrapy_redis' 2>/dev/null; then
    [ "$PYTHON" = "$VENV/bin/python" ] || die "$PYTHON cannot import scrapy and scrapy_redis"
    echo "== creating $VENV (scrapy==$SCRAPY_VERSION scrapy-redis==$SCRAPY_REDIS_VERSION)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "scrapy==$SCRAPY_VERSION" "scrapy-redis==$SCRAPY_REDIS_VERSION"
fi
measure() { "$PYTHON" "$here/measure.py" "$@"; }

# OUT is replaced at the end: refuse a directory that is not ours.
if [ -e "$OUT" ] && [ ! -f "$OUT/results.jsonl" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
    die "$OUT exists and holds no results.jsonl: not replacing it (set OUT)"
fi

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_free "$REDIS_PORT" || die "127.0.0.1:$REDIS_PORT is in use (set REDIS_PORT)"
port_free "$DEMO_PORT" || die "127.0.0.1:$DEMO_PORT is in use (set DEMO_PORT)"

work=$(mktemp -d /tmp/crawlworker-compare.XXXXXX)
pids=()     # redis-server, demo server: for the whole run
running=()  # /usr/bin/time wrappers of the workers, and MONITOR, while a run lasts
cleanup() {
    local p
    # GNU time does not pass signals on: stop each worker (its child) first.
    for p in "${running[@]}"; do pkill -TERM -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${running[@]}" "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${BIN:-}" ]; then
  echo "== crawlworker: $BIN; building the demo site (release)"
  cargo build --release --quiet -p crawlworker-demo
else
  echo "== building crawlworker and the demo site (release)"
  cargo build --release --quiet -p crawlworker -p crawlworker-demo
fi
bin=$(realpath "${BIN:-$root/target/release/crawlworker}")
demo_bin=$root/target/release/crawlworker-demo

echo "== redis-server on 127.0.0.1:$REDIS_PORT (no persistence)"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$work" --logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$REDIS_PORT" ping >/dev/null || die "redis-server did not start"
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
redis_url="redis://127.0.0.1:$REDIS_PORT"

echo "== demo forum on 127.0.0.1:$DEMO_PORT (--forums $FORUMS --pages $PAGES --page-kb $PAGE_KB)"
"$demo_bin" serve --listen "127.0.0.1:$DEMO_PORT" --forums "$FORUMS" --pages "$PAGES" --page-kb "$PAGE_KB" \
    2>"$work/demo.log" &
demo_pid=$!
pids+=($demo_pid)
for _ in $(seq 100); do port_free "$DEMO_PORT" || break; sleep 0.1; done
port_free "$DEMO_PORT" && die "demo server did not start"
"$demo_bin" tasks --forums "$FORUMS" --pages "$PAGES" >"$work/tasks.txt"
mapfile -t tasks <"$work/tasks.txt"

# crawlworker's spider: spiders/bbs.toml with the URLs moved to the demo port.
sed "s#127.0.0.1:8700#127.0.0.1:$DEMO_PORT#g" spiders/bbs.toml >"$work/bbs.toml"

results=$work/results.jsonl
: >"$results"

# One run of one side: fresh Redis, tasks pushed, stats reset, N workers
# started together and waited for.
run_side() { # side workers rep [monitor]
    local side=$1 n=$2 rep=$3 mon=${4:-}
    local tag="$side.$n.$rep" start_key i
    case $side in
        crawlworker) start_key=bbs:start_urls ;;
        *) start_key=bbs_sr:start_urls ;;
    esac
    rcli flushall >/dev/null
    rcli rpush "$start_key" "${tasks[@]}" >/dev/null
    rcli config resetstat >/dev/null
    rcli info all >"$work/before.$tag.info"
    measure snapshot "$work/before.$tag.info" "$work/before.$tag.json" "$demo_pid"
    local monpid=
    if [ -n "$mon" ]; then
        redis-cli -p "$REDIS_PORT" monitor >"$work/monitor.$side.log" &
        monpid=$!
        running+=($monpid)
        sleep 0.3
    fi
    local wpids=() tfiles=() sfiles=() logs=()
    local t0 t1
    t0=$(date +%s.%N)
    for i in $(seq "$n"); do
        tfiles+=("$work/time.$tag.$i")
        logs+=("$work/log.$tag.$i")
        if [ "$side" = crawlworker ]; then
            REDIS_URL=$redis_url CRAWLWORKER_ROBOTSTXT_OBEY=false CRAWLWORKER_LOG=warn \
                /usr/bin/time -v -o "$work/time.$tag.$i" \
                "$bin" run "$work/bbs.toml" --until-drained \
                >"$work/log.$tag.$i" 2>&1 &
        else
            sfiles+=("$work/srstats.$tag.$i.json")
            local rstats=0
            [ "$side" = scrapy-redis-rstats ] && rstats=1
            REDIS_URL=$redis_url BBS_SR_BASE="http://127.0.0.1:$DEMO_PORT" \
                BBS_SR_STATS="$work/srstats.$tag.$i.json" BBS_SR_REDIS_STATS=$rstats \
                /usr/bin/time -v -o "$work/time.$tag.$i" \
                "$PYTHON" -m scrapy runspider "$here/bbs_spider.py" \
                2>"$work/log.$tag.$i" &
        fi
        wpids+=($!)
    done
    running+=("${wpids[@]}")
    local failed=0
    for i in "${!wpids[@]}"; do
        wait "${wpids[$i]}" || failed=1
    done
    t1=$(date +%s.%N)
    rcli info all >"$work/after.$tag.info"
    running=()
    [ -n "$monpid" ] && running=($monpid)
    if [ "$failed" = 1 ]; then
        echo "a $side worker failed; its log:" >&2
        tail -20 "$work"/log."$tag".* >&2
        exit 1
    fi
    if [ -n "$monpid" ]; then
        sleep 0.2
        kill "$monpid" 2>/dev/null || true
        wait "$monpid" 2>/dev/null || true
        running=()
    fi
    local wall
    wall=$(awk "BEGIN{print $t1 - $t0}")
    local res=$results
    [ -n "$mon" ] && res=$work/monitor-results.jsonl
    local extra=()
    [ "${#sfiles[@]}" -gt 0 ] && extra=(--sr-stats "${sfiles[@]}")
    measure collect --side "$side" --workers "$n" --rep "$rep" --redis "$redis_url" \
        --before "$work/before.$tag.json" --after-info "$work/after.$tag.info" --wall "$wall" --end "$t1" \
        --time-files "${tfiles[@]}" --logs "${logs[@]}" "${extra[@]}" \
        --demo-pid "$demo_pid" --items-out "$work/items.$tag.jsonl" \
        --dupefilter-out "$work/dupefilter.$tag.txt" --results "$res"
    if [ -n "$mon" ]; then
        local pages
        pages=$(tail -1 "$res" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["pages"])')
        measure monitor "$work/monitor.$side.log" "$pages" "$work/monitor.$side.json"
        rm -f "$work/monitor.$side.log"
    fi
}

echo "== runs (each: FLUSHALL, push ${#tasks[@]} tasks, CONFIG RESETSTAT, workers until done)"
for n in $WORKERS; do
    for rep in $(seq "$REPS"); do
        # Alternate the sides so drift on the machine hits both alike.
        if [ $((rep % 2)) = 1 ]; then order="crawlworker scrapy-redis"; else order="scrapy-redis crawlworker"; fi
        for side in $order; do run_side "$side" "$n" "$rep"; done
    done
done
if [ "$RSTATS" = 1 ]; then
    echo "== extra: scrapy-redis with RedisStatsCollector, 1 worker"
    run_side scrapy-redis-rstats 1 1
fi
if [ "$MONITOR" = 1 ]; then
    echo "== extra: one 1-worker run per side under MONITOR (not timed)"
    run_side crawlworker 1 0 monitor
    run_side scrapy-redis 1 0 monitor
fi

echo "== items (compared with the first crawlworker run, key order ignored)"
first_workers=${WORKERS%% *}
reference=$work/items.crawlworker.$first_workers.1.jsonl
items_ok=1
for f in "$work"/items.*.jsonl; do
    [ "$f" = "$reference" ] && continue
    measure compare "$reference" "$f" || items_ok=0
done
echo "== dupefilter fingerprints (compared with the first crawlworker run)"
dreference=$work/dupefilter.crawlworker.$first_workers.1.txt
for f in "$work"/dupefilter.*.txt; do
    [ "$f" = "$dreference" ] && continue
    if cmp -s "$dreference" "$f"; then
        echo "  $(basename "$f"): the same $(wc -l <"$f") fingerprints"
    else
        echo "  $(basename "$f"): DIFFERENT ($(comm -23 "$dreference" "$f" | wc -l) only in crawlworker's, $(comm -13 "$dreference" "$f" | wc -l) only in this one)"
        items_ok=0
    fi
done

rm -rf "$OUT"
mkdir -p "$OUT"
cp "$results" "$work"/monitor.*.json "$work"/srstats.*.json "$work"/time.* "$work"/log.* "$work"/*.info "$OUT"/ 2>/dev/null || true
cp "$work/monitor-results.jsonl" "$OUT"/ 2>/dev/null || true
cp "$work/items.crawlworker.$first_workers.1.jsonl" "$work/items.scrapy-redis.$first_workers.1.jsonl" "$OUT"/ 2>/dev/null || true

echo
echo "## crawlworker vs scrapy-redis — $FORUMS forums × $PAGES list pages, ${#tasks[@]} tasks, $PAGE_KB KiB of chrome a page"
echo
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/^Mem:/{print $2}') GiB RAM;" \
    "crawlworker $("$bin" --version 2>/dev/null | awk '{print $2}'), redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')," \
    "$("$PYTHON" -c 'import sys, scrapy, scrapy_redis, twisted; print(f"Python {sys.version.split()[0]}, Scrapy {scrapy.__version__}, scrapy-redis {scrapy_redis.__version__}, Twisted {twisted.__version__}")')"
measure report "$results" "$work"
echo
echo "raw results: $OUT"
if [ "$items_ok" != 1 ]; then
    echo "ITEM SETS OR DUPEFILTER SETS DIFFER (see above)" >&2
    exit 1
fi
