#!/usr/bin/env bash
# Where a worker's CPU goes, by stage of a page: one worker (the release
# build with its symbols, `cargo build --profile profiling`) crawls the
# generated forum to the end under `perf record`, and every sample is put
# in the stage its function belongs to (by the crate in its name; see
# scripts/bench/worker_stages.py). Prints the worker's CPU per page and a
# table of stages: share of the worker's CPU and µs per page.
#
#     scripts/bench/worker_profile.sh
#     SIZE="--forums 24 --pages 50" scripts/bench/worker_profile.sh
#     WORKER=/path/to/crawlworker-with-symbols SPIDER=old-bbs.toml scripts/bench/worker_profile.sh
#     CALLERS=1 scripts/bench/worker_profile.sh     # each sample to the stage that asked for it
#
# A flat profile: a sample counts where the CPU was, so memory copies and
# allocation are one stage of their own whoever asked for them, and the
# kernel's share is the system calls (network, timers). CALLERS=1 records
# call graphs (DWARF; slower, larger) and charges each sample to the
# innermost stage on its stack instead: the allocation, copies and
# system calls an HTTP exchange makes count for HTTP. Needs perf
# (linux-perf) and a kernel that lets it sample (perf_event_paranoid ≤ 1,
# or root). Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE=${SIZE:---forums 12 --pages 50}
port=${REDIS_PORT:-16630}
demo_port=${DEMO_PORT:-18830}
FREQ=${FREQ:-2999}
command -v perf >/dev/null || { echo "perf is needed (apt-get install linux-perf)" >&2; exit 1; }
if [ -z "${WORKER:-}" ]; then
  cargo build --profile profiling --quiet -p crawlworker
  WORKER=target/profiling/crawlworker
fi
. scripts/bench/forum_setup.sh
forum_work
forum_redis redis-server
forum_site
redis-cli -p "$port" rpush bbs:start_urls "${tasks[@]}" >/dev/null
CRAWLWORKER_ROBOTSTXT_OBEY=false CRAWLWORKER_REDIS_URL="redis://127.0.0.1:$port" \
  perf record -F "$FREQ" ${CALLERS:+--call-graph dwarf,16384} -o "$work/perf.data" -- \
  /usr/bin/time -f '%U %S' -o "$work/time.txt" \
  "$WORKER" run "$work/bbs.toml" --until-drained >"$work/worker.log" 2>"$work/perf.log"
pages=$(redis-cli -p "$port" hget bbs:stats downloader/response_count)
read -r user sys <"$work/time.txt"
echo "# $WORKER; $pages pages (demo ${SIZE}); worker CPU $user s user + $sys s system; $(nproc) CPUs"
if [ -n "${CALLERS:-}" ]; then
  perf script -i "$work/perf.data" 2>/dev/null >"$work/script.txt"
  python3 scripts/bench/worker_stages.py --callers "$work/script.txt" "$pages" "$user" "$sys"
else
  perf report -i "$work/perf.data" --no-children --sort symbol -g none --percent-limit 0 2>/dev/null >"$work/report.txt"
  python3 scripts/bench/worker_stages.py "$work/report.txt" "$pages" "$user" "$sys"
fi
