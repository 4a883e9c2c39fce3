#!/usr/bin/env bash
# Rendering JavaScript-built pages: crawlworker's headless Chromium against
# Crawlee's PuppeteerCrawler, on the same pages of the demo forum's /js/
# section, with the same Chromium (/usr/bin/chromium), in the same run.
#
#     scripts/bench/render/compare.sh              # REPS=3: 6 crawls, ~4 min
#     REPS=1 scripts/bench/render/compare.sh       # one crawl per tool
#
# For each tool and run: pages rendered, items, wall time, pages/s, and CPU
# seconds of the crawler process AND every Chromium process it started,
# whoever reaps them (each run is put in a cgroup of its own, see
# "CPU accounting" below), then CPU ms per page. Medians over REPS runs,
# the two tools alternating which goes first. Everything listens on, and
# everything crawled is on, 127.0.0.1.
#
# What both crawl: the three tasks of the spider's docs (103 pages: 10 list
# pages, 33 posts, 60 comment pages; 243 items; plus robots.txt), with
#   - crawlworker: spiders/bbs-rendered.toml (its port rewritten), run with
#     `crawlworker run --local` (no Redis; queue and dupefilter in memory);
#   - Crawlee: scripts/bench/render/crawlee.mjs, the same rules as a
#     PuppeteerCrawler (its header lists every setting and why).
# Both render 4 pages at once, wait for the load event then 500 ms without
# a request in flight, scroll list pages once, wait for h1.post-title on
# posts, and never load images, fonts or media.
#
# Knobs (environment):
#   REPS        runs per tool (3)
#   TOOLS       "crawlworker crawlee"; add crawlee-defaults for a third side:
#               Crawlee with its own fingerprint, browser-retirement and
#               session-rotation defaults (see crawlee.mjs)
#   BREAKDOWN   1: one more crawl per tool, its CPU split by kind of
#               process (see "where the CPU goes" below)
#   DEMO_PORT   the demo server's port (18702)
#   CHROMIUM    the browser both use (/usr/bin/chromium)
#   BUILD       0: skip `cargo build`
#   OUT         where the raw results are copied (/tmp/crawlworker-bench-render,
#               replaced on each run)
#   CRAWLEE_DIR where the npm packages are installed
#               (${XDG_CACHE_HOME:-~/.cache}/crawlworker-bench/crawlee)
#   CPU_METER   cgroup (the default) or perf: `perf stat -e task-clock`,
#               which counts every descendant too, for machines without a
#               writable cgroup (no user/system split, no leftover check)
#
# Needs: cargo, node >= 18 and npm (Crawlee 3.18 + puppeteer-core 24,
# pinned in package.json / package-lock.json; no browser is downloaded),
# python3, GNU time (/usr/bin/time), and root or a writable cgroup.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
here=$root/scripts/bench/render

REPS=${REPS:-3}
TOOLS=${TOOLS:-crawlworker crawlee}
DEMO_PORT=${DEMO_PORT:-18702}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
OUT=${OUT:-/tmp/crawlworker-bench-render}
CRAWLEE_DIR=${CRAWLEE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crawlworker-bench/crawlee}
CPU_METER=${CPU_METER:-cgroup}
TABS=4                   # render_pages in the spider; maxConcurrency in Crawlee
EXPECT_PAGES=103         # rendered pages per crawl (robots.txt not counted)
EXPECT_ITEMS=243
# The start tasks, as the spider's docs give them.
TASKS=('{"forum_id":"00001","max_page":5}' '{"forum_id":"00002","max_page":3}' '{"forum_id":"00003","max_page":2}')

keep_work=0  # 1: a check failed; the temporary folder is kept for a look
die() { echo "compare.sh: $*" >&2; exit 1; }
# A failed check: says what, keeps the logs and items, exits 1.
fail() { keep_work=1; die "$@"; }

# --- What it needs --------------------------------------------------------
[ -x /usr/bin/time ] || die "needs GNU time at /usr/bin/time (apt-get install time)"
[ -x "$CHROMIUM" ] || die "no Chromium at $CHROMIUM (apt-get install chromium, or set CHROMIUM)"
command -v node >/dev/null || die "needs node (>= 18)"
command -v npm >/dev/null || die "needs npm"
command -v python3 >/dev/null || die "needs python3"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' \
    || die "needs node >= 18 (found $(node --version))"
# OUT is replaced at the end: refuse a directory that is not ours.
if [ -e "$OUT" ] && [ ! -f "$OUT/results.jsonl" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
    die "$OUT exists and holds no results.jsonl: not replacing it (set OUT)"
fi
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_free "$DEMO_PORT" || die "127.0.0.1:$DEMO_PORT is in use (set DEMO_PORT)"

# --- CPU accounting -------------------------------------------------------
# GNU time reports the crawler's own CPU plus that of the children it
# waited for. crawlworker never waits for its Chromium (it is killed when
# the worker exits) and Chromium's renderers are not the crawler's children
# at all, so GNU time misses most of the work (it is still recorded, as
# `time_cpu_s`, to show how much). Instead each run gets a cgroup of its
# own: the tool is moved into it before it starts, every process it starts
# (Chromium, its zygotes, renderers, GPU and utility processes, Crawlee's
# `ps` snapshots) is born in it, and the kernel sums their CPU time whether
# or not anyone waits for them.
cg_root=
cg_kind=
cgroups=()   # every cgroup made, removed on exit
case $CPU_METER in
    cgroup)
        if [ -f /sys/fs/cgroup/cpuacct/cpuacct.usage ] && [ -w /sys/fs/cgroup/cpuacct ]; then
            cg_kind=v1 cg_root=/sys/fs/cgroup/cpuacct
        else
            v2=$(findmnt -n -t cgroup2 -o TARGET 2>/dev/null | head -1 || true)
            if [ -n "$v2" ] && [ -w "$v2" ]; then
                cg_kind=v2 cg_root=$v2
            else
                die "no writable cgroup (cgroup v1 cpuacct or cgroup2) to count CPU in: run as root, or CPU_METER=perf"
            fi
        fi
        ;;
    perf)
        command -v perf >/dev/null || die "CPU_METER=perf needs perf (apt-get install linux-perf)"
        ;;
    *) die "CPU_METER is cgroup or perf, not $CPU_METER" ;;
esac
clk_tck=$(getconf CLK_TCK)

# A new, empty cgroup for one run; prints its path.
cg_new() {
    local cg=$cg_root/crawlworker-bench-render.$$.$1
    mkdir "$cg"
    cgroups+=("$cg")
    echo "$cg"
}
# CPU seconds used in a cgroup, "total user system".
cg_cpu() {
    if [ "$cg_kind" = v1 ]; then
        local ns
        ns=$(cat "$1/cpuacct.usage")
        awk -v ns="$ns" -v hz="$clk_tck" '/^user/{u=$2} /^system/{s=$2}
            END{printf "%.3f %.3f %.3f\n", ns/1e9, u/hz, s/hz}' "$1/cpuacct.stat"
    else
        awk '/^usage_usec/{t=$2} /^user_usec/{u=$2} /^system_usec/{s=$2}
            END{printf "%.3f %.3f %.3f\n", t/1e6, u/1e6, s/1e6}' "$1/cpu.stat"
    fi
}
cg_procs() { cat "$1/cgroup.procs"; }
# Kills whatever is left in a cgroup (only processes this script started
# are in it) and removes it.
cg_remove() {
    local cg=$1 pid
    [ -d "$cg" ] || return 0
    for _ in $(seq 50); do
        [ -z "$(cg_procs "$cg")" ] && break
        for pid in $(cg_procs "$cg"); do kill -KILL "$pid" 2>/dev/null || true; done
        sleep 0.1
    done
    rmdir "$cg" 2>/dev/null || true
}

# --- Cleanup: the demo server, and anything left in our cgroups -----------
work=$(mktemp -d /tmp/crawlworker-bench-render.XXXXXX)
demo_pid=
tool_pid=
cleanup() {
    local cg
    [ -n "$tool_pid" ] && kill_group "$tool_pid"
    for cg in "${cgroups[@]}"; do cg_remove "$cg"; done
    [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null || true
    [ -n "$demo_pid" ] && wait "$demo_pid" 2>/dev/null || true
    if [ "$keep_work" = 1 ]; then
        echo "compare.sh: logs, items and results kept in $work" >&2
        rm -rf "$work"/tmp.* "$work/crawlee-storage"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- Build crawlworker and the demo server --------------------------------
if [ "${BUILD:-1}" = 1 ]; then
    echo "== building crawlworker and crawlworker-demo (release)"
    cargo build --release --quiet -p crawlworker -p crawlworker-demo
fi
bin=$root/target/release/crawlworker
demo_bin=$root/target/release/crawlworker-demo

# --- Install Crawlee (outside the repository) -----------------------------
# package.json and package-lock.json pin the versions; npm ci installs
# exactly those. PUPPETEER_SKIP_DOWNLOAD: puppeteer-core downloads no
# browser anyway; this makes sure nothing else does.
mkdir -p "$CRAWLEE_DIR"
if ! cmp -s "$here/package-lock.json" "$CRAWLEE_DIR/package-lock.json" \
    || [ ! -d "$CRAWLEE_DIR/node_modules/crawlee" ]; then
    echo "== installing Crawlee into $CRAWLEE_DIR (npm ci)"
    cp "$here/package.json" "$here/package-lock.json" "$CRAWLEE_DIR/"
    (cd "$CRAWLEE_DIR" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
# The script runs next to its node_modules, so that `import 'crawlee'`
# resolves there.
cp "$here/crawlee.mjs" "$CRAWLEE_DIR/crawlee.mjs"
crawlee_version=$(node -p "require('$CRAWLEE_DIR/node_modules/crawlee/package.json').version")
puppeteer_version=$(node -p "require('$CRAWLEE_DIR/node_modules/puppeteer-core/package.json').version")

# --- The demo server ------------------------------------------------------
echo "== demo site on 127.0.0.1:$DEMO_PORT"
"$demo_bin" serve --listen "127.0.0.1:$DEMO_PORT" >"$work/demo.log" 2>&1 &
demo_pid=$!
for _ in $(seq 100); do port_free "$DEMO_PORT" || break; sleep 0.1; done
port_free "$DEMO_PORT" && die "the demo server did not start (see $work/demo.log)"
base=http://127.0.0.1:$DEMO_PORT
# The demo server's CPU seconds so far (a check that both tools asked it
# for the same work).
demo_cpu() { awk -v hz="$clk_tck" '{sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13) / hz}' "/proc/$demo_pid/stat"; }

# CPU seconds the whole machine has been busy (all cores; /proc/stat:
# user, nice, system, irq, softirq; not steal): over a run, less the run's
# own CPU and the demo server's, it gives what other work on the machine
# took meanwhile.
machine_busy() { awk -v hz="$clk_tck" '/^cpu /{printf "%.3f\n", ($2 + $3 + $4 + $7 + $8) / hz}' /proc/stat; }

# crawlworker's spider, pointed at the demo port.
sed "s#127.0.0.1:8700#127.0.0.1:$DEMO_PORT#g" spiders/bbs-rendered.toml >"$work/bbs-rendered.toml"
start_args=()
for t in "${TASKS[@]}"; do start_args+=(--start "$t"); done
tasks_json="[$(IFS=,; echo "${TASKS[*]}")]"

# --- One crawl ------------------------------------------------------------
results=$work/results.jsonl
: >"$results"

# The command line of one tool's crawl, writing its items to $1.
# Each crawl gets its own TMPDIR under $work, where the Chromium profile
# folders go (crawlworker's /tmp/crawlworker-chromium-<pid>-<n>, which it
# leaves behind when it exits; puppeteer's puppeteer_dev_chrome_profile-*):
# removed with $work.
tool_command() { # tool items-file stats-file
    local tmp
    tmp=$(mktemp -d "$work/tmp.XXXXXX")
    case $1 in
        crawlworker)
            # INFO: the stats it logs at the end give the pages rendered.
            cmd=(env TMPDIR="$tmp" CRAWLWORKER_CHROMIUM="$CHROMIUM" CRAWLWORKER_LOG=info
                "$bin" run "$work/bbs-rendered.toml" --local "${start_args[@]}" -o "$2") ;;
        crawlee | crawlee-defaults)
            local storage=$work/crawlee-storage profile=matched
            [ "$1" = crawlee-defaults ] && profile=defaults
            rm -rf "$storage"
            cmd=(env TMPDIR="$tmp" CRAWLEE_STORAGE_DIR="$storage" CRAWLEE_PURGE_ON_START=1
                BASE="$base" TASKS="$tasks_json" ITEMS="$2" STATS="$3"
                CHROMIUM="$CHROMIUM" TABS="$TABS" PROFILE="$profile"
                node "$CRAWLEE_DIR/crawlee.mjs") ;;
        *) die "unknown tool $1 in TOOLS (crawlworker, crawlee, crawlee-defaults)" ;;
    esac
}

# Starts a command in the background, in cgroup $1 if not empty, its
# output to $2; its pid in $tool_pid. The shell moves itself into the
# cgroup, then becomes the command: everything the command starts is born
# in the cgroup. It also gets a process group of its own (setsid), so that
# without a cgroup (CPU_METER=perf) what is left of it can still be killed.
launch() { # cgroup log command...
    local cg=$1 log=$2
    shift 2
    if [ -n "$cg" ]; then
        setsid sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@" >"$log" 2>&1 &
    else
        setsid "$@" >"$log" 2>&1 &
    fi
    tool_pid=$!
}
# Kills what is left of the process group of a command started by launch.
kill_group() { kill -KILL -- "-$1" 2>/dev/null || true; }

# Runs one crawl of one tool in a fresh cgroup, under GNU time, and
# appends its figures to $results.
run_tool() { # tool rep slot
    local tool=$1 rep=$2 slot=$3 tag="$1.$2"
    local items=$work/items.$tag.jsonl stats=$work/stats.$tag.json log=$work/log.$tag
    local timef=$work/time.$tag perff=$work/perf.$tag cg=
    tool_command "$tool" "$items" "$stats"
    local wrap=(/usr/bin/time -f '%e %U %S' -o "$timef")
    if [ "$CPU_METER" = perf ]; then
        wrap=(perf stat -x, -e task-clock -o "$perff" -- "${wrap[@]}")
    else
        cg=$(cg_new "$tag")
    fi
    local demo0 busy0 busy1 t0 t1 rc=0 pgid
    demo0=$(demo_cpu)
    busy0=$(machine_busy)
    t0=$(date +%s.%N)
    launch "$cg" "$log" "${wrap[@]}" "${cmd[@]}"
    pgid=$tool_pid
    wait "$tool_pid" || rc=$?
    tool_pid=
    t1=$(date +%s.%N)
    busy1=$(machine_busy)
    # Processes still running once the tool has exited (a Chromium not
    # yet gone): given 2 s, then killed (their CPU so far is counted).
    local left=0 cpu
    if [ -n "$cg" ]; then
        for _ in $(seq 20); do
            left=$(cg_procs "$cg" | wc -l)
            [ "$left" = 0 ] && break
            sleep 0.1
        done
        [ "$left" = 0 ] || echo "   ($left processes of $tool still running 2 s after it exited: killed)"
        for pid in $(cg_procs "$cg"); do kill -KILL "$pid" 2>/dev/null || true; done
        for _ in $(seq 50); do [ -z "$(cg_procs "$cg")" ] && break; sleep 0.1; done
        cpu=$(cg_cpu "$cg")
        cg_remove "$cg"
    else
        # perf's task-clock: milliseconds of CPU of the whole tree (no
        # user/system split).
        cpu=$(awk -F, '$3 ~ /task-clock/ {printf "%.3f - -\n", $1 / 1000}' "$perff")
        kill_group "$pgid"
    fi
    if [ "$rc" != 0 ]; then
        echo "compare.sh: $tool (run $rep) exited with $rc; the end of its log:" >&2
        tail -30 "$log" >&2
        fail "$tool (run $rep) failed"
    fi
    python3 "$here/measure.py" record "$results" --tool "$tool" --rep "$rep" --slot "$slot" \
        --wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}')" --cpu "$cpu" \
        --time-file "$timef" --log "$log" --stats "$stats" \
        --demo-cpu "$(awk -v a="$demo0" -v b="$(demo_cpu)" 'BEGIN{print b - a}')" --left "$left" \
        --machine-busy "$(awk -v a="$busy0" -v b="$busy1" 'BEGIN{print b - a}')"
    # A tool that renders another number of pages fails the benchmark now.
    local pages
    pages=$(tail -1 "$results" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["pages"], r["items"], r["failed"])')
    [ "$pages" = "$EXPECT_PAGES $EXPECT_ITEMS 0" ] \
        || fail "$tool (run $rep): pages, items, failed = $pages; expected $EXPECT_PAGES $EXPECT_ITEMS 0 (log: $log)"
}

# --- The runs -------------------------------------------------------------
# One warm-up crawl per tool first (not counted): the first Chromium start
# on a machine reads its files from disk, and node compiles Crawlee's
# modules; neither should land on whichever tool happens to go first.
echo "== warm-up: one crawl per tool (not counted)"
for tool in $TOOLS; do
    tool_command "$tool" "$work/warmup.$tool.jsonl" "$work/warmup.$tool.json"
    cg=
    [ "$CPU_METER" = cgroup ] && cg=$(cg_new "warmup.$tool")
    launch "$cg" "$work/warmup.$tool.log" "${cmd[@]}"
    wait "$tool_pid" || { tail -30 "$work/warmup.$tool.log" >&2; die "$tool's warm-up crawl failed"; }
    # What is left: in the cgroup, or (perf) in the process group.
    if [ -n "$cg" ]; then cg_remove "$cg"; else kill_group "$tool_pid"; fi
    tool_pid=
done

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
reversed=$(echo "$TOOLS" | tr ' ' '\n' | tac | tr '\n' ' ')
echo "== $REPS run(s) per tool, alternating which goes first ($TABS pages at once in each)"
for rep in $(seq "$REPS"); do
    # Odd runs in the order of TOOLS, even runs the other way round, so
    # that drift on the machine hits every tool alike.
    if [ $((rep % 2)) = 1 ]; then order=$TOOLS; else order=$reversed; fi
    slot=1
    for tool in $order; do
        run_tool "$tool" "$rep" "$slot"
        slot=$((slot + 1))
    done
done

# --- Optional: where the CPU goes ------------------------------------------
# BREAKDOWN=1: one more crawl per tool, in its cgroup, with every process
# in it read every 0.1 s (/proc/<pid>/stat) and summed by kind (the
# crawler; Chromium's browser, renderer, GPU, utility, zygote processes).
# The sampler costs a little CPU itself, and misses what a process does in
# its last 0.1 s, so these crawls are not in the medians.
breakdowns=()
if [ "${BREAKDOWN:-0}" = 1 ] && [ "$CPU_METER" = cgroup ]; then
    echo "== breakdown: one more crawl per tool, its processes sampled (not in the medians)"
    for tool in $TOOLS; do
        tool_command "$tool" "$work/bd.$tool.jsonl" "$work/bd.$tool.json"
        cg=$(cg_new "bd.$tool")
        launch "$cg" "$work/bd.$tool.log" "${cmd[@]}"
        python3 "$here/measure.py" sample "$cg" "$work/breakdown.$tool.json" "$tool" &
        sampler=$!
        wait "$tool_pid" || { tail -30 "$work/bd.$tool.log" >&2; die "$tool's breakdown crawl failed"; }
        tool_pid=
        for pid in $(cg_procs "$cg"); do kill -KILL "$pid" 2>/dev/null || true; done
        wait "$sampler"
        python3 "$here/measure.py" add-cgroup-cpu "$work/breakdown.$tool.json" "$(cg_cpu "$cg" | cut -d' ' -f1)"
        cg_remove "$cg"
        breakdowns+=("$work/breakdown.$tool.json")
    done
fi

# --- Same items from every run ---------------------------------------------
# Every run's items, against the first crawlworker run's (or the first
# tool's): the same multiset of objects, URLs normalized. Exits if not.
item_files=()
for tool in $TOOLS; do item_files+=("$work"/items."$tool".*.jsonl); done
python3 "$here/measure.py" items "$EXPECT_ITEMS" "$base" "${item_files[@]}" || fail "the items differ"

# --- The report -----------------------------------------------------------
{
    echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), Linux $(uname -r)."
    echo "Chromium: $("$CHROMIUM" --version 2>/dev/null) ($CHROMIUM). node $(node --version), crawlee $crawlee_version, puppeteer-core $puppeteer_version."
    echo "crawlworker $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src crates 2>/dev/null || echo ' (with uncommitted changes in src/ or crates/)'). CPU counted by: $([ "$CPU_METER" = perf ] && echo 'perf stat -e task-clock (inherited by every descendant)' || echo "a cgroup per run ($cg_kind, $cg_root)")."
    echo "Load average (1, 5, 15 min) before the counted runs: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg). \"Other work\" (per run): the CPU the rest of the machine used meanwhile (/proc/stat, less the run's own and the demo server's); well above 0, the run shared the cores."
} >"$work/machine.txt"
python3 "$here/measure.py" report "$results" "$work/machine.txt" "${breakdowns[@]}" | tee "$work/report.md"

# --- Raw results, kept ------------------------------------------------------
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$results" "$work/report.md" "$work/machine.txt" "$work"/log.* "$work"/time.* "$OUT/"
for tool in $TOOLS; do cp "$work/items.$tool.1.jsonl" "$OUT/"; done
echo
echo "raw results in $OUT"
