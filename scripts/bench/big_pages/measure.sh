#!/usr/bin/env bash
# A worker's peak RSS on large pages (docs/memory.md, "What a page costs"):
# a fresh redis-server and scripts/bench/big_pages/serve.py on 127.0.0.1 (pages of
# generated markup, /len/N with Content-Length, /chunked/N without), one
# worker run --until-drained, its VmHWM sampled every 50 ms (stopped past
# 4 GB). Prints the peak, the time, the items and the failed records.
#
#     scripts/bench/big_pages/measure.sh 'download_maxsize = "128 MiB"' /chunked/100000000
#     scripts/bench/big_pages/measure.sh '' /len/700000000 /len/700000001 /len/700000002
#     BIN=target/release/crawlworker scripts/bench/big_pages/measure.sh '' /chunked/30000000
#
# FIELDS adds fields to the page item, e.g. one holding the whole page's
# text (items as large as their pages):
#
#     FIELDS='text = { css = "body ::text", join = "" }' scripts/bench/big_pages/measure.sh '' /chunked/30000000
#
# PAUSE=S makes Redis refuse writes for S seconds from 1 s after the worker
# starts (CLIENT PAUSE WRITE, as a busy or failing-over Redis does): pages
# extracted meanwhile wait for their commits.
set -uo pipefail
cd "$(dirname "$0")/../../.."
bin=${BIN:-target/debug/crawlworker}
settings=$1
fields=${FIELDS:-}
shift
rport=${REDIS_PORT:-16481}
hport=${PAGES_PORT:-18781}
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" &
pids+=($!)
python3 scripts/bench/big_pages/serve.py "$hport" &
pids+=($!)
sleep 1
printf 'name = "big"\n[settings]\nallow_private_networks = true\nretry_times = 0\n%b\n[items.page]\nurl = { page = "url" }\ntitle = { css = "title::text" }\n%s\n[[rules]]\nname = "page"\nmatch = "."\n  [[rules.extract]]\n  item = "page"\n' "$settings" "$fields" >"$work/big.toml"
urls=()
for p in "$@"; do urls+=("http://127.0.0.1:$hport$p"); done
"$bin" push-urls "$work/big.toml" --redis "redis://127.0.0.1:$rport" "${urls[@]}" >/dev/null
start=$(date +%s.%N)
CRAWLWORKER_LOG=warn "$bin" run "$work/big.toml" --redis "redis://127.0.0.1:$rport" --until-drained 2>"$work/log" &
worker=$!
if [ -n "${PAUSE:-}" ]; then
  (sleep 1; redis-cli -p "$rport" client pause $((PAUSE * 1000)) write >/dev/null) &
fi
peak=0
while kill -0 "$worker" 2>/dev/null; do
  hwm=$(awk '/VmHWM/{print $2}' "/proc/$worker/status" 2>/dev/null)
  if [ -n "$hwm" ] && [ "$hwm" -gt "$peak" ]; then peak=$hwm; fi
  if [ "$peak" -gt 4000000 ]; then kill "$worker"; echo "stopped past 4 GB"; fi
  sleep 0.05
done
wait "$worker"
rc=$?
end=$(date +%s.%N)
echo "exit $rc, peak RSS $((peak / 1024)) MiB, $(echo "$end - $start" | bc) s, items $(redis-cli -p "$rport" llen big:items)"
redis-cli -p "$rport" lrange big:failed 0 -1 | cut -c1-300
