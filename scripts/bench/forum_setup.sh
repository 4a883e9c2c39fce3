# Sourced by the one-worker forum benchmarks (forum_redis_cpu.sh,
# forum_instructions.sh, commit_wait.sh, worker_profile.sh,
# worker_instructions.sh, worker_memory.sh, replay/record.sh,
# replay/instructions.sh): a
# Redis and the generated forum on 127.0.0.1, and the tasks to crawl.
#
# The sourcing script sets `port`, `demo_port` and `SIZE` (the demo's
# size arguments), is at the repository root, and calls:
#   forum_builds PROFILE ARG…   the builds a script compares (`builds`):
#                               its arguments, else this checkout's
#                               build of PROFILE (release, profiling),
#                               built now
#   forum_work                  a work directory ($work), cleaned up on exit
#   forum_redis COMMAND…        starts `COMMAND --port $port …` (redis-server,
#                               or it under valgrind) and waits for it;
#                               its pid is $redis_pid
#   forum_site                  builds and starts the demo forum (SIZE, and
#                               SERVE: more `serve` flags such as
#                               `--latency 100ms`); writes the
#                               spider ($work/bbs.toml, from SPIDER,
#                               spiders/bbs.toml by default: name an
#                               older copy when an older build compared
#                               cannot read today's) and the tasks
#                               ($work/tasks.txt, and the array `tasks`)
#   forum_fresh                 empties Redis, pushes the tasks and resets its
#                               command counts: before each crawl of a run
#   script_calls                the script calls (EVAL, EVALSHA, FCALL) Redis ran
#   callgrind_server            checks for valgrind and sets `server` to
#                               REDIS_SERVER, a redis-server with symbols
#   callgrind_counts FILE       the instructions of a callgrind profile of
#                               Redis: all, then the script calls' (FCALL,
#                               inclusive: what Redis does besides, its
#                               cron and client I/O, moves with wall time)

forum_builds() {
  local profile=$1
  shift
  builds=("$@")
  if [ ${#builds[@]} -eq 0 ]; then
    cargo build --profile "$profile" --quiet -p crawlworker
    builds=("target/$profile/crawlworker")
  fi
}

forum_work() {
  work=$(mktemp -d)
  pids=()
  # Waits for what it killed, so a run right after finds the ports free.
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait; rm -rf "$work"' EXIT
}

forum_redis() {
  "$@" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
  redis_pid=$!
  pids+=("$redis_pid")
  for _ in $(seq 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "Redis did not start on port $port; see $work/redis.log" >&2
  exit 1
}

forum_site() {
  cargo build --release --quiet -p crawlworker-demo
  demo_bin=target/release/crawlworker-demo
  # shellcheck disable=SC2086
  "$demo_bin" serve --listen "127.0.0.1:$demo_port" $SIZE ${SERVE:-} >"$work/demo.log" 2>&1 &
  pids+=($!)
  sed "s#127.0.0.1:8700#127.0.0.1:$demo_port#g" "${SPIDER:-spiders/bbs.toml}" >"$work/bbs.toml"
  # shellcheck disable=SC2086
  "$demo_bin" tasks $SIZE >"$work/tasks.txt"
  mapfile -t tasks <"$work/tasks.txt"
}

forum_fresh() {
  redis-cli -p "$port" flushall >/dev/null
  redis-cli -p "$port" rpush bbs:start_urls "${tasks[@]}" >/dev/null
  redis-cli -p "$port" config resetstat >/dev/null
}

script_calls() {
  redis-cli -p "$port" info commandstats | tr -d '\r' | grep -E '^cmdstat_(eval(sha)?|fcall):' |
    sed 's/^[^:]*:calls=\([0-9]*\).*/\1/' | paste -sd+ | bc
}

callgrind_server() {
  server=${REDIS_SERVER:?set REDIS_SERVER to a redis-server built with symbols (make in a redis checkout)}
  command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
}

callgrind_counts() {
  local total scripts
  total=$(callgrind_annotate "$1" 2>/dev/null | grep "PROGRAM TOTALS" | head -1 | awk '{print $1}' | tr -d ,)
  # (awk reads to the end: a reader that stops early fails the pipeline.)
  scripts=$(callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
    awk '/fcallCommand \[/ && !found { print $1; found = 1 }' | tr -d ,)
  echo "${total:-0} ${scripts:-0}"
}
