#!/usr/bin/env bash
# Redis round trips per crawled page for the demo crawl (3 workers, until
# drained), read from a fresh redis-server: MONITOR counts the commands
# clients send (one round trip each; commands run inside scripts are tagged
# `lua` and not counted), INFO commandstats gives the totals by command.
#
#     scripts/bench/redis_commands.sh                                 # the demo forum
#     SIZE="--forums 6 --pages 20" scripts/bench/redis_commands.sh    # a generated one
set -euo pipefail
cd "$(dirname "$0")/../.."
port=${REDIS_PORT:-16479}
demo=${DEMO_PORT:-18700}
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

cargo build --release --quiet -p crawlworker -p crawlworker-demo
bin=target/release/crawlworker
demo_bin=target/release/crawlworker-demo
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
# SIZE="--forums 6 --pages 20" crawls a generated forum instead of the demo.
size=${SIZE:-}
"$demo_bin" serve --listen "127.0.0.1:$demo" $size 2>/dev/null &
pids+=($!)
sed "s#127.0.0.1:8700#127.0.0.1:$demo#g" spiders/bbs.toml >"$work/bbs.toml"
export REDIS_URL="redis://127.0.0.1:$port"
"$demo_bin" tasks $size | "$bin" push-urls "$work/bbs.toml" 2>/dev/null
redis-cli -p "$port" config resetstat >/dev/null
redis-cli -p "$port" monitor >"$work/monitor.log" &
mon=$!
sleep 0.3
for i in 1 2 3; do CRAWLWORKER_LOG=error "$bin" run "$work/bbs.toml" --until-drained 2>/dev/null & done
wait -n; wait -n; wait -n 2>/dev/null || true
sleep 0.3
kill "$mon" 2>/dev/null || true
pages=$(redis-cli -p "$port" hget bbs:stats downloader/response_count)
sent=$(grep -c '^[0-9]' "$work/monitor.log" | tr -d ' ')
inlua=$(grep -c ' \[[0-9]* lua\] ' "$work/monitor.log" | tr -d ' ' || true)
client=$((sent - inlua))
echo "pages crawled:              $pages"
echo "client commands (round trips): $client  = $(awk "BEGIN{printf \"%.2f\", $client/$pages}") per page"
echo "commands run inside scripts:   $inlua"
echo
echo "client commands by name:"
grep '^[0-9]' "$work/monitor.log" | grep -v ' lua\] ' | awk '{print toupper($4)}' | tr -d '"' | sort | uniq -c | sort -rn
echo
echo "INFO commandstats (all commands, scripts' included):"
redis-cli -p "$port" info commandstats | grep cmdstat | cut -d, -f1 | sed 's/cmdstat_/  /'
