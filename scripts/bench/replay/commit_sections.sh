#!/usr/bin/env bash
# Where a commit script call's time goes, section by section of
# commit.lua, per call (F) and per page (P): a recording (record.sh)
# replayed into a plain redis-server with a clock reading at checkpoints
# of its commit function (commit_sections.py). Times are Redis's clock:
# run it on a quiet machine.
#
#     SERVE="--latency 20ms" WORKERS=6 scripts/bench/replay/record.sh target/release/crawlworker /tmp/rec6
#     scripts/bench/replay/commit_sections.sh /tmp/rec6.mon
set -euo pipefail
rec=$(realpath "${1:?usage: commit_sections.sh REC.mon}")
port=${REDIS_PORT:-16624}
cd "$(dirname "$0")/../../.."
. scripts/bench/forum_setup.sh
forum_work
forum_redis redis-server
python3 scripts/bench/replay/commit_sections.py instrument "$rec" "$work/sections.mon"
python3 scripts/bench/replay/replay.py "$rec" "$port" "$work/sections.mon"
python3 scripts/bench/replay/commit_sections.py report "$port"
