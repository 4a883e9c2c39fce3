"""Measurement helper for scripts/bench/compare/run.sh (needs redis-py: run it with
the scrapy-redis venv's python).

    measure.py snapshot  REDIS_URL OUT.json [DEMO_PID]
    measure.py collect   --side S --workers N --rep R --redis URL
                         --before BEFORE.json --wall SECONDS
                         --time-files F... [--sr-stats F...] [--demo-pid PID]
                         --items-out ITEMS.jsonl --results RESULTS.jsonl
    measure.py monitor   MONITOR.log PAGES OUT.json
    measure.py compare   REFERENCE.jsonl OTHER.jsonl
    measure.py report    RESULTS.jsonl [MONITOR-DIR]

Every number is read from the benchmark's own redis-server (INFO, MEMORY
USAGE, SCARD, LLEN, HGET), from GNU time's report for each worker process,
and, for scrapy-redis, from the final Scrapy stats each worker writes.
"""

import collections
import glob
import json
import os
import re
import statistics
import sys

import redis

SIDES = {
    # side: (key prefix, label)
    "crawlworker": ("bbs", "crawlworker"),
    "scrapy-redis": ("bbs_sr", "scrapy-redis"),
    "scrapy-redis-rstats": ("bbs_sr", "scrapy-redis + RedisStatsCollector"),
}


def parse_info(path):
    """`redis-cli INFO all` output → the fields used here, flat, with
    commandstats as {command: calls}."""
    out, calls = {}, {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or ":" not in line:
                continue
            key, value = line.split(":", 1)
            if key.startswith("cmdstat_"):
                fields = dict(kv.split("=", 1) for kv in value.split(","))
                calls[key[len("cmdstat_"):]] = int(fields["calls"])
                continue
            try:
                out[key] = int(value)
            except ValueError:
                try:
                    out[key] = float(value)
                except ValueError:
                    out[key] = value
    out["commandstats"] = calls
    out["_reply_bytes"] = os.path.getsize(path)
    return out


def proc_cpu_seconds(pid):
    """user+sys CPU seconds of a running process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def snapshot(info_file, out, demo_pid=None):
    data = {"info": parse_info(info_file)}
    if demo_pid:
        data["demo_cpu"] = proc_cpu_seconds(demo_pid)
    with open(out, "w") as f:
        json.dump(data, f)


def worker_calls(before, after):
    calls = {}
    for name, n in after.items():
        n -= before.get(name, 0)
        if name == "info":
            n -= 1
        if n:
            calls[name] = n
    return calls


def gnu_time(path):
    """User, system, elapsed and max RSS from `/usr/bin/time -v -o path`."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("User time (seconds):"):
                out["user"] = float(line.split(":")[1])
            elif line.startswith("System time (seconds):"):
                out["sys"] = float(line.split(":")[1])
            elif line.startswith("Maximum resident set size (kbytes):"):
                out["rss_kib"] = int(line.split(":")[1])
            elif line.startswith("Exit status:"):
                out["exit"] = int(line.split(":")[1])
    return out


def canonical(item_bytes):
    return json.dumps(json.loads(item_bytes), sort_keys=True, ensure_ascii=False)


def collect(args):
    opts = parse_opts(args)
    side = opts["side"][0]
    prefix = SIDES[side][0]
    client = redis.Redis.from_url(opts["redis"][0], protocol=2)
    with open(opts["before"][0]) as f:
        before = json.load(f)
    after = {"info": parse_info(opts["after-info"][0])}
    demo_pid = opts.get("demo-pid", [None])[0]
    b, a = before["info"], after["info"]

    workers = [gnu_time(p) for p in opts["time-files"]]
    rec = {
        "side": side,
        "workers": int(opts["workers"][0]),
        "rep": int(opts["rep"][0]),
        "wall_s": float(opts["wall"][0]),
        "worker_cpu_s": sum(w["user"] + w["sys"] for w in workers),
        "worker_user_s": sum(w["user"] for w in workers),
        "worker_sys_s": sum(w["sys"] for w in workers),
        "peak_rss_mib_max": max(w["rss_kib"] for w in workers) / 1024,
        "peak_rss_mib_sum": sum(w["rss_kib"] for w in workers) / 1024,
        "worker_exit": [w.get("exit") for w in workers],
        "redis_cpu_s": (a["used_cpu_user"] + a["used_cpu_sys"])
        - (b["used_cpu_user"] + b["used_cpu_sys"]),
        # CONFIG RESETSTAT, then one `INFO all` (before), then the workers,
        # then one `INFO all` (after, which does not count itself): the
        # difference less that one INFO is what the workers did.
        "commandstats": worker_calls(b["commandstats"], a["commandstats"]),
        "total_commands_processed": a["total_commands_processed"]
        - b["total_commands_processed"] - 1,
        "reads_processed": a["total_reads_processed"] - b["total_reads_processed"] - 1,
        "net_in_bytes": a["total_net_input_bytes"] - b["total_net_input_bytes"],
        "net_out_bytes": a["total_net_output_bytes"] - b["total_net_output_bytes"]
        - b["_reply_bytes"],
        "used_memory": a["used_memory"],
    }
    rec["commands_total"] = sum(rec["commandstats"].values())
    if demo_pid:
        now = proc_cpu_seconds(demo_pid)
        if now is not None and before.get("demo_cpu") is not None:
            rec["demo_cpu_s"] = now - before["demo_cpu"]

    dupefilter = f"{prefix}:dupefilter"
    rec["dupefilter_entries"] = client.scard(dupefilter)
    rec["dupefilter_bytes"] = client.memory_usage(dupefilter, samples=0) or 0
    rec["dupefilter_encoding"] = (client.object("encoding", dupefilter) or b"").decode()
    if opts.get("dupefilter-out"):
        with open(opts["dupefilter-out"][0], "w") as out:
            out.writelines(sorted(m.decode() + "\n" for m in client.smembers(dupefilter)))
    items_key = f"{prefix}:items"
    rec["items"] = client.llen(items_key)
    rec["items_bytes"] = client.memory_usage(items_key, samples=0) or 0
    raw_items = client.lrange(items_key, 0, -1)
    rec["items_payload_bytes"] = sum(len(x) for x in raw_items)
    rec["leftover_keys"] = sorted(k.decode() for k in client.keys("*"))
    rec["requests_left"] = (
        client.zcard(f"{prefix}:requests")
        if client.type(f"{prefix}:requests") == b"zset"
        else 0
    )

    if side == "crawlworker":
        stats = {k.decode(): v.decode() for k, v in client.hgetall("bbs:stats").items()}
        rec["pages"] = int(stats.get("downloader/response_count", 0))
        rec["stats"] = stats
        # Each worker ends with "spider `bbs` stopped (the
        # crawl is drained) after 0.8 s: N pages, …" on standard error.
        per_worker = []
        for path in opts.get("logs", []):
            with open(path, errors="replace") as f:
                found = re.findall(r"stopped \([^)]*\) after [\d.]+ s: (\d+) pages", f.read())
            per_worker.append(int(found[-1]) if found else None)
        rec["pages_per_worker"] = per_worker
    else:
        per_worker = []
        last_response = []
        for path in opts.get("sr-stats", []):
            try:
                with open(path) as f:
                    s = json.load(f)
            except (OSError, ValueError):
                s = {}
            per_worker.append(int(s.get("downloader/response_count", 0)))
            if s.get("bench/last_response_unix"):
                last_response.append(float(s["bench/last_response_unix"]))
            rec.setdefault("finish_reasons", []).append(s.get("finish_reason"))
        redis_stats = {
            k.decode(): v.decode() for k, v in client.hgetall(f"{prefix}:stats").items()
        }
        if redis_stats:
            rec["pages"] = int(redis_stats.get("downloader/response_count", 0))
            rec["stats"] = redis_stats
        else:
            rec["pages"] = sum(per_worker)
        rec["pages_per_worker"] = per_worker
        if last_response and opts.get("end"):
            rec["idle_tail_s"] = float(opts["end"][0]) - max(last_response)

    with open(opts["items-out"][0], "w", encoding="utf-8") as out:
        for item in raw_items:
            out.write(canonical(item) + "\n")
    with open(opts["results"][0], "a") as out:
        out.write(json.dumps(rec) + "\n")
    print(
        f"  {side:<20} workers={rec['workers']} rep={rec['rep']}: "
        f"{rec['pages']} pages, {rec['items']} items, wall {rec['wall_s']:.2f} s, "
        f"worker CPU {rec['worker_cpu_s']:.2f} s, redis CPU {rec['redis_cpu_s']:.2f} s, "
        f"peak RSS {rec['peak_rss_mib_max']:.1f} MiB, "
        f"{rec['commands_total'] / max(rec['pages'], 1):.2f} redis commands/page"
        + (f", pages per worker {rec['pages_per_worker']}" if rec["pages_per_worker"] else "")
    )


def parse_opts(args):
    opts = {}
    key = None
    for arg in args:
        if arg.startswith("--"):
            key = arg[2:]
            opts.setdefault(key, [])
        else:
            opts[key].append(arg)
    return opts


def monitor(log, pages, out):
    """Counts a MONITOR log: commands clients sent, by name, and commands
    run inside scripts (tagged `[db lua]`)."""
    client_cmds = collections.Counter()
    in_scripts = collections.Counter()
    with open(log, "rb") as f:
        for line in f:
            if not line[:1].isdigit():
                continue
            try:
                head, rest = line.split(b"] ", 1)
            except ValueError:
                continue
            name = rest.split(b" ", 1)[0].strip(b'"\n').decode(errors="replace").upper()
            if head.endswith(b" lua"):
                in_scripts[name] += 1
            else:
                client_cmds[name] += 1
    # run.sh's own `INFO all` after the workers exited, while MONITOR ran.
    client_cmds["INFO"] -= 1
    client_cmds = +client_cmds
    pages = int(pages)
    data = {
        "pages": pages,
        "client": dict(client_cmds.most_common()),
        "scripts": dict(in_scripts.most_common()),
        "client_total": sum(client_cmds.values()),
        "scripts_total": sum(in_scripts.values()),
    }
    with open(out, "w") as f:
        json.dump(data, f, indent=1)


def compare(reference, other):
    """Compares two item dumps as multisets of canonical JSON objects (key
    order ignored). Prints a summary; exit status 1 when they differ."""
    with open(reference, encoding="utf-8") as f:
        a = collections.Counter(f.read().splitlines())
    with open(other, encoding="utf-8") as f:
        b = collections.Counter(f.read().splitlines())
    only_a, only_b = a - b, b - a
    dup_a = sum(n - 1 for n in a.values() if n > 1)
    dup_b = sum(n - 1 for n in b.values() if n > 1)
    same = not only_a and not only_b
    print(
        f"  items {os.path.basename(reference)} vs {os.path.basename(other)}: "
        f"{sum(a.values())} vs {sum(b.values())}, "
        + ("identical" if same else f"{sum(only_a.values())} only in the first, "
           f"{sum(only_b.values())} only in the second")
        + (f" (duplicates: {dup_a} / {dup_b})" if dup_a or dup_b else "")
    )
    if not same:
        # Pair differing items by identity to show the differing fields.
        def ident(line):
            item = json.loads(line)
            return (item.get("kind"), item.get("comment_id") or item.get("post_id"))

        by_id_b = {ident(x): json.loads(x) for x in only_b}
        for line in list(only_a)[:5]:
            item = json.loads(line)
            twin = by_id_b.get(ident(line))
            if twin is None:
                print(f"    only in the first: {line[:200]}")
            else:
                diff = {k: (item.get(k), twin.get(k)) for k in set(item) | set(twin)
                        if item.get(k) != twin.get(k)}
                print(f"    {ident(line)} differs: {diff}")
        for line in list(only_b)[:5]:
            if ident(line) not in {ident(x) for x in only_a}:
                print(f"    only in the second: {line[:200]}")
    return 0 if same else 1


# --------------------------------------------------------------------- report

def fmt(value, digits=2):
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    r = a / b
    return f"{r:.3g}×"


METRICS = [
    # (label, function of a record, digits)
    ("pages crawled", lambda r: r["pages"], 0),
    ("items", lambda r: r["items"], 0),
    ("wall time, s (workers start → last exits)", lambda r: r["wall_s"], 2),
    ("pages per wall-second", lambda r: r["pages"] / r["wall_s"], 0),
    ("worker CPU, s (user+sys, all workers)", lambda r: r["worker_cpu_s"], 2),
    ("**pages per worker CPU-second**", lambda r: r["pages"] / r["worker_cpu_s"], 0),
    ("redis-server CPU, s", lambda r: r["redis_cpu_s"], 2),
    ("pages per CPU-second, workers + redis-server",
     lambda r: r["pages"] / (r["worker_cpu_s"] + r["redis_cpu_s"]), 0),
    ("demo server CPU, s (same site, sanity check)", lambda r: r.get("demo_cpu_s"), 2),
    ("**Redis commands per page** (INFO commandstats, incl. inside scripts)",
     lambda r: r["commands_total"] / r["pages"], 2),
    ("Redis read events per page (≈ client round trips)",
     lambda r: (r["reads_processed"] or 0) / r["pages"], 2),
    ("Redis bytes received per page", lambda r: r["net_in_bytes"] / r["pages"], 0),
    ("Redis bytes sent per page", lambda r: r["net_out_bytes"] / r["pages"], 0),
    ("dupefilter entries", lambda r: r["dupefilter_entries"], 0),
    ("**Redis bytes per dupefilter entry** (MEMORY USAGE / SCARD)",
     lambda r: r["dupefilter_bytes"] / max(r["dupefilter_entries"], 1), 1),
    ("Redis bytes per item (MEMORY USAGE items / LLEN)",
     lambda r: r["items_bytes"] / max(r["items"], 1), 0),
    ("**worker peak RSS, MiB** (largest worker)", lambda r: r["peak_rss_mib_max"], 1),
    ("worker peak RSS, MiB (sum over workers)", lambda r: r["peak_rss_mib_sum"], 1),
]


def median_of(records, fn):
    values = [fn(r) for r in records]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def report(results, monitor_dir=None):
    records = [json.loads(line) for line in open(results)]
    groups = collections.defaultdict(list)
    for r in records:
        groups[(r["side"], r["workers"])].append(r)
    worker_counts = sorted({w for _, w in groups})
    for workers in worker_counts:
        cw = groups.get(("crawlworker", workers), [])
        sr = groups.get(("scrapy-redis", workers), [])
        if not cw or not sr:
            continue
        reps = f"{len(cw)} / {len(sr)}"
        print(f"\n### {workers} worker{'s' if workers > 1 else ''} per side "
              f"(median of {reps} runs)\n")
        print("| metric | crawlworker | scrapy-redis | ratio cw ÷ sr |")
        print("|---|---:|---:|---:|")
        for label, fn, digits in METRICS:
            a, b = median_of(cw, fn), median_of(sr, fn)
            print(f"| {label} | {fmt(a, digits)} | {fmt(b, digits)} | {ratio(a, b)} |")
        tails = [r["idle_tail_s"] for r in sr if r.get("idle_tail_s") is not None]
        if tails:
            print(f"\nscrapy-redis: last response → last worker exit: "
                  f"median {statistics.median(tails):.2f} s (idle close), included in its wall time.")
        if workers > 1:
            for name, rs in (("crawlworker", cw), ("scrapy-redis", sr)):
                spread = [r.get("pages_per_worker") for r in rs]
                print(f"{name} pages per worker, each run: {spread}")
        print(f"CPU spread (min–max worker CPU s): crawlworker "
              f"{min(r['worker_cpu_s'] for r in cw):.2f}–{max(r['worker_cpu_s'] for r in cw):.2f}, "
              f"scrapy-redis {min(r['worker_cpu_s'] for r in sr):.2f}–{max(r['worker_cpu_s'] for r in sr):.2f}")

    variant = groups.get(("scrapy-redis-rstats", 1), [])
    if variant:
        base = groups.get(("scrapy-redis", 1), [])
        print("\n### scrapy-redis with its RedisStatsCollector (stats in Redis, like "
              "crawlworker), 1 worker\n")
        print("| metric | crawlworker | scrapy-redis + RedisStatsCollector | ratio cw ÷ it |")
        print("|---|---:|---:|---:|")
        cw = groups.get(("crawlworker", 1), [])
        for label, fn, digits in METRICS:
            if "dupefilter" in label or "per item" in label or "demo" in label:
                continue
            a, b = median_of(cw, fn), median_of(variant, fn)
            print(f"| {label} | {fmt(a, digits)} | {fmt(b, digits)} | {ratio(a, b)} |")

    # Calls per page by command, 1 worker, median run of each side.
    for workers in worker_counts[:1]:
        print(f"\n### Redis calls per page by command ({workers} worker, INFO commandstats, "
              "commands inside scripts included)\n")
        sides = [s for s in ("crawlworker", "scrapy-redis", "scrapy-redis-rstats")
                 if groups.get((s, workers))]
        per = {}
        for s in sides:
            rs = groups[(s, workers)]
            r = sorted(rs, key=lambda r: r["commands_total"] / r["pages"])[len(rs) // 2]
            per[s] = {k: v / r["pages"] for k, v in r["commandstats"].items()}
        names = sorted({k for p in per.values() for k in p},
                       key=lambda k: -max(p.get(k, 0) for p in per.values()))
        print("(commands below 0.0005 per page on every side left out)\n")
        print("| command | " + " | ".join(SIDES[s][1] for s in sides) + " |")
        print("|---|" + "---:|" * len(sides))
        for name in names:
            if max(per[s].get(name, 0) for s in sides) < 0.0005:
                continue
            print(f"| {name} | " + " | ".join(fmt(per[s].get(name, 0), 3) for s in sides) + " |")

    if monitor_dir:
        files = sorted(glob.glob(os.path.join(monitor_dir, "monitor.*.json")))
        if files:
            print("\n### Commands clients sent vs commands run inside scripts "
                  "(MONITOR, separate 1-worker run)\n")
            print("| side | client commands per page | of which by name (per page) "
                  "| commands inside scripts per page |")
            print("|---|---:|---|---:|")
            for path in files:
                side = path.split("monitor.")[1].rsplit(".json", 1)[0]
                m = json.load(open(path))
                p = m["pages"]
                top = ", ".join(f"{k} {v / p:.2f}" for k, v in list(m["client"].items())[:8])
                print(f"| {SIDES[side][1]} | {m['client_total'] / p:.2f} | {top} | "
                      f"{m['scripts_total'] / p:.2f} |")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "snapshot":
        snapshot(*args)
    elif cmd == "collect":
        collect(args)
    elif cmd == "monitor":
        monitor(*args)
    elif cmd == "compare":
        sys.exit(compare(*args))
    elif cmd == "report":
        report(*args)
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
