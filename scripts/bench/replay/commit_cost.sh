#!/usr/bin/env bash
# What a commit script call costs Redis, per call (F) and per page (P): a
# recording (record.sh) replayed into a plain redis-server with every
# command in its slow log, then the commits' times fitted to their pages
# (commit_cost.py). With a second recording, its scripts answer the
# first's calls (see replay.py). Times are Redis's clock: run it on a
# quiet machine, and compare builds in one sitting.
#
#     SERVE="--latency 20ms" WORKERS=6 scripts/bench/replay/record.sh target/release/crawlworker /tmp/rec6
#     scripts/bench/replay/commit_cost.sh /tmp/rec6.mon
set -euo pipefail
rec=$(realpath "${1:?usage: commit_cost.sh REC.mon [OTHER.mon]}")
other=${2:+$(realpath "$2")}
port=${REDIS_PORT:-16623}
cd "$(dirname "$0")/../../.."
. scripts/bench/forum_setup.sh
forum_work
forum_redis redis-server
redis-cli -p "$port" config set slowlog-max-len 10000000 >/dev/null
redis-cli -p "$port" config set slowlog-log-slower-than 0 >/dev/null
python3 scripts/bench/replay/replay.py "$rec" "$port" $other
cd scripts/bench/replay && python3 commit_cost.py "$rec" "$port"
