#!/usr/bin/env bash
# Records every command a crawl of the generated forum sends
# Redis (redis-cli MONITOR), for scripts/bench/replay/instructions.sh to replay.
#
#     scripts/bench/replay/record.sh target/release/crawlworker /tmp/rec
#     EXTRA=CRAWLWORKER_COMMIT_WAIT=10ms scripts/bench/replay/record.sh target/release/crawlworker /tmp/rec10
#
#     SERVE="--latency 100ms" WORKERS=16 scripts/bench/replay/record.sh target/release/crawlworker /tmp/rec16
#
# (WORKERS: how many workers crawl together, 1 unless given.) Writes OUT.mon (the MONITOR lines) and OUT.tasks (the start URLs, pushed
# before recording). MONITOR slows Redis, so commits carry a few more
# pages than in a crawl without it; the recording is what both sides of a
# comparison replay, so that does not matter.
set -euo pipefail
worker=${1:?usage: record.sh CRAWLWORKER OUT}
out=${2:?usage: record.sh CRAWLWORKER OUT}
worker=$(realpath "$worker")
out=$(realpath -m "$out")
cd "$(dirname "$0")/../../.."
SIZE=${SIZE:---forums 12 --pages 50}
port=${REDIS_PORT:-16620}
demo_port=${DEMO_PORT:-18820}
. scripts/bench/forum_setup.sh
forum_work
forum_redis redis-server
forum_site
cp "$work/tasks.txt" "$out.tasks"
redis-cli -p "$port" rpush bbs:start_urls "${tasks[@]}" >/dev/null
redis-cli -p "$port" monitor >"$out.mon" &
pids+=($!)
sleep 0.3
# EXTRA: more settings for the worker, as VAR=value words.
ws=()
for i in $(seq "${WORKERS:-1}"); do
  env CRAWLWORKER_ROBOTSTXT_OBEY=false ${EXTRA:-} CRAWLWORKER_REDIS_URL="redis://127.0.0.1:$port" \
    "$worker" run "$work/bbs.toml" --until-drained >"$work/worker.$i.log" 2>&1 &
  ws+=($!)
done
for p in "${ws[@]}"; do wait "$p"; done
sleep 0.3
pages=$(redis-cli -p "$port" hget bbs:stats downloader/response_count)
calls=$(grep -v ' lua\]' "$out.mon" | grep -cE '"(EVALSHA|FCALL)"' || true)
echo "recorded $out.mon: $pages pages, $calls script calls ($(echo "scale=1; $pages / $calls" | bc) pages per call)"
