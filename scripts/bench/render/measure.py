"""The bookkeeping of scripts/bench/render/compare.sh.

    measure.py record RESULTS --tool T --rep N --slot S --wall W --cpu "TOTAL USER SYS"
                      --time-file F --log F [--stats F] --demo-cpu SECONDS --left N
        appends one run's figures to RESULTS (JSON Lines);
    measure.py items EXPECTED BASE FILE...
        checks that every item file holds EXPECTED items and the same ones
        as the first (a multiset of JSON objects, keys sorted, the demo
        server's address in `url` replaced, URLs normalized); exits 1 if not;
    measure.py report RESULTS MACHINE [BREAKDOWN...]
        prints the per-run figures and the table of medians (Markdown), and
        the CPU by process kind of the BREAKDOWN files;
    measure.py sample CGROUP OUT TOOL
        reads the CPU time of every process in CGROUP every 0.1 s until the
        cgroup is empty, then writes the seconds per kind of process
        (Chromium's browser, renderer, GPU, ... processes; the crawler) to
        OUT as JSON.
"""

import argparse
import collections
import json
import os
import re
import statistics
import sys
import time
from urllib.parse import quote, unquote, urlsplit, urlunsplit


def record(args):
    elapsed, time_user, time_sys = (float(x) for x in open(args.time_file).read().split()[-3:])
    # "- -": no user/system split (perf).
    total, user, system = (None if x == "-" else float(x) for x in args.cpu.split())
    log = open(args.log, encoding="utf-8", errors="replace").read()
    if args.tool == "crawlworker":
        # The stats the worker logs when the crawl is drained.
        stat = lambda name: int(re.search(rf"^\s*{re.escape(name)}: (\d+)", log, re.M).group(1))
        pages, items = stat("render/page_count"), stat("item_scraped_count")
        crawl_s = float(re.search(r"^\s*elapsed_time_seconds: ([\d.]+)", log, re.M).group(1))
        failed = int(re.search(r"(\d+) requests failed for good", log).group(1))
        browsers = len(re.findall(r"started Chromium to render pages", log))
        tabs = None
    else:
        stats = json.load(open(args.stats))
        pages, items, failed, crawl_s = stats["pages"], stats["items"], stats["failed"], stats["seconds"]
        browsers = stats["browsers"]
        tabs = f"{stats['tabs_mean']:.1f} (at most {stats['tabs_max']})"
    rec = {
        "tool": args.tool,
        "rep": args.rep,
        "slot": args.slot,
        "pages": pages,
        "items": items,
        "failed": failed,
        "browsers": browsers,
        "crawlee_tabs_mean": tabs,
        "wall_s": round(args.wall, 3),
        "crawl_s": round(crawl_s, 3),
        "cpu_s": total,
        "cpu_user_s": user,
        "cpu_sys_s": system,
        "time_cpu_s": round(time_user + time_sys, 3),
        "demo_cpu_s": args.demo_cpu,
        "left_after_exit": args.left,
        # CPU the rest of the machine used meanwhile (read a moment apart
        # from the cgroup's: a little noise either way).
        "other_cpu_s": round(args.machine_busy - total - args.demo_cpu, 2),
    }
    with open(args.results, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(
        f"   {args.tool:<11} run {args.rep}: {pages} pages, {items} items, "
        f"{rec['wall_s']:.2f} s wall, {total:.2f} CPU s "
        f"({1000 * total / max(pages, 1):.0f} ms/page; GNU time saw {rec['time_cpu_s']:.2f} s; "
        f"other work meanwhile {rec['other_cpu_s']:.1f} CPU s)"
        + (f"; tabs open on average {tabs}" if tabs else "")
    )


def normal_url(url, base):
    """The URL without the demo server's address, its escapes in one form."""
    url = url.replace(base, "BASE", 1)
    parts = urlsplit(url)
    path = quote(unquote(parts.path), safe="/%:@!$&'()*+,;=~-._")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def items(args):
    sets = []
    ok = True
    for name in args.files:
        bag = collections.Counter()
        for line in open(name, encoding="utf-8"):
            if not line.strip():
                continue
            item = json.loads(line)
            if "url" in item and isinstance(item["url"], str):
                item["url"] = normal_url(item["url"], args.base)
            bag[json.dumps(item, sort_keys=True, ensure_ascii=False)] += 1
        n = sum(bag.values())
        if n != args.expected:
            print(f"compare.sh: {name}: {n} items, not {args.expected}", file=sys.stderr)
            ok = False
        sets.append((name, bag))
    first_name, first = sets[0]
    for name, bag in sets[1:]:
        if bag != first:
            ok = False
            only_first, only_this = first - bag, bag - first
            print(
                f"compare.sh: {name} differs from {first_name}: "
                f"{sum(only_first.values())} items only in the first, "
                f"{sum(only_this.values())} only in this one, e.g.",
                file=sys.stderr,
            )
            for x in list(only_first)[:2]:
                print(f"  - {x}", file=sys.stderr)
            for x in list(only_this)[:2]:
                print(f"  + {x}", file=sys.stderr)
    if not ok:
        sys.exit(1)
    print(f"   items: every run has the same {args.expected} items ({len(args.files)} files compared)")


NAMES = {
    "crawlworker": "crawlworker",
    "crawlee": "Crawlee (PuppeteerCrawler)",
    "crawlee-defaults": "Crawlee, its defaults¹",
}


def report(args):
    runs = [json.loads(line) for line in open(args.results)]
    tools = [t for t in NAMES if any(r["tool"] == t for r in runs)]
    by = {t: [r for r in runs if r["tool"] == t] for t in tools}

    def split(r):
        if r["cpu_user_s"] is None:
            return "–"
        return f"{r['cpu_user_s']:.2f} / {r['cpu_sys_s']:.2f}"

    print("\n### Per run\n")
    print("| tool | run | order | pages | items | Chromium starts | wall s | pages/s | CPU s (whole tree) | user / sys s | CPU ms/page | GNU time's CPU s | demo server CPU s | other work CPU s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(runs, key=lambda r: (r["rep"], r["slot"])):
        print(
            f"| {NAMES[r['tool']]} | {r['rep']} | {r['slot']} | {r['pages']} | {r['items']} | {r['browsers']} "
            f"| {r['wall_s']:.2f} | {r['pages'] / r['wall_s']:.2f} | {r['cpu_s']:.2f} "
            f"| {split(r)} | {1000 * r['cpu_s'] / r['pages']:.0f} "
            f"| {r['time_cpu_s']:.2f} | {r['demo_cpu_s']:.2f} | {r.get('other_cpu_s', float('nan')):.1f} |"
        )

    def med(tool, f):
        return statistics.median(f(r) for r in by[tool])

    def user_sys(t):
        if any(r["cpu_user_s"] is None for r in by[t]):
            return "–"
        return f"{med(t, lambda r: r['cpu_user_s']):.2f} / {med(t, lambda r: r['cpu_sys_s']):.2f}"

    rows = [
        ("pages rendered", lambda r: r["pages"], "{:.0f}", False),
        ("items", lambda r: r["items"], "{:.0f}", False),
        ("Chromium starts", lambda r: r["browsers"], "{:.0f}", False),
        ("wall time, s", lambda r: r["wall_s"], "{:.2f}", True),
        ("pages/s", lambda r: r["pages"] / r["wall_s"], "{:.2f}", True),
        ("**CPU s, crawler + all its Chromium processes**", lambda r: r["cpu_s"], "{:.2f}", True),
        ("of which user / system, s", user_sys, None, False),
        ("**CPU ms per page**", lambda r: 1000 * r["cpu_s"] / r["pages"], "{:.0f}", True),
        ("GNU time's CPU s (crawler + the children it waited for)", lambda r: r["time_cpu_s"], "{:.2f}", False),
        ("demo server CPU s (a check: same work asked)", lambda r: r["demo_cpu_s"], "{:.2f}", False),
    ]
    reps = min(len(v) for v in by.values())
    ratio = "crawlworker" in tools and "crawlee" in tools
    print(f"\n### Medians over {reps} run(s) per tool\n")
    print("| | " + " | ".join(NAMES[t] for t in tools) + (" | crawlworker ÷ Crawlee |" if ratio else " |"))
    print("|---|" + "---:|" * (len(tools) + ratio))
    for label, f, fmt, has_ratio in rows:
        if fmt is None:
            cells = [f(t) for t in tools]
        else:
            cells = [fmt.format(med(t, f)) for t in tools]
        if ratio:
            r = ""
            if has_ratio:
                r = f"{med('crawlworker', f) / med('crawlee', f):.2f}×"
            cells.append(r)
        print(f"| {label} | " + " | ".join(cells) + " |")
    if "crawlee-defaults" in tools:
        print(
            "\n¹ The same crawlee.mjs with PROFILE=defaults: Crawlee's own fingerprint"
            " injection, browser retirement (after 100 pages) and session rotation"
            " (a new browser with each new session, every 50 pages)."
        )
    if args.breakdown:
        breakdown(args.breakdown, runs)
    print()
    print(open(args.machine).read().rstrip())


def process_kind(pid):
    """What a process is: the crawler, or which of Chromium's processes."""
    try:
        # Chromium rewrites its command line as one string: read it whole.
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    exe = os.path.basename(cmd.split(" ", 1)[0])
    if "crashpad" in exe:
        return "Chromium crashpad handler"
    # Chromium starts some of its processes as /proc/self/exe --type=...
    if "chrom" in exe or "--type=" in cmd:
        kind = re.search(r"--type=(\S+)", cmd)
        sub = re.search(r"--utility-sub-type=(\S+)", cmd)
        if not kind:
            return "Chromium browser process"
        return "Chromium " + kind.group(1) + (f" ({sub.group(1)})" if sub else "")
    return exe


def sample(args):
    hz = os.sysconf("SC_CLK_TCK")
    seen = {}  # pid -> [kind, CPU ticks at the last look]
    while True:
        try:
            pids = open(f"{args.cgroup}/cgroup.procs").read().split()
        except OSError:
            break
        for pid in pids:
            try:
                stat = open(f"/proc/{pid}/stat").read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            ticks = int(fields[11]) + int(fields[12])  # utime + stime
            # The kind as last seen: a process forked from Chromium's zygote
            # shows the zygote's command line until it becomes a renderer;
            # the tool's first process is sh, then GNU time, then the tool.
            kind = process_kind(pid) or seen.get(pid, ["?"])[0]
            seen[pid] = [kind, ticks]
        if not pids and seen:
            break
        time.sleep(0.1)
    kinds = collections.defaultdict(lambda: {"cpu_s": 0.0, "processes": 0})
    for kind, ticks in seen.values():
        kinds[kind]["cpu_s"] += ticks / hz
        kinds[kind]["processes"] += 1
    json.dump({"tool": args.tool, "kinds": kinds}, open(args.out, "w"))


def breakdown(files, runs):
    print("\n### Where the CPU goes (one extra crawl per tool, sampled every 0.1 s; not in the medians)\n")
    print("| tool | kind of process | processes | CPU s | CPU ms/page |")
    print("|---|---|---:|---:|---:|")
    for name in files:
        b = json.load(open(name))
        total = sum(k["cpu_s"] for k in b["kinds"].values())
        pages = statistics.median(r["pages"] for r in runs if r["tool"] == b["tool"])
        for kind, k in sorted(b["kinds"].items(), key=lambda x: -x[1]["cpu_s"]):
            if k["cpu_s"] >= 0.05:
                print(f"| {NAMES[b['tool']]} | {kind} | {k['processes']} | {k['cpu_s']:.2f} | {1000 * k['cpu_s'] / pages:.0f} |")
        cg = b.get("cgroup_cpu_s")
        print(f"| {NAMES[b['tool']]} | **all sampled** (the cgroup counted {cg:.2f}) | | **{total:.2f}** | **{1000 * total / pages:.0f}** |")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("results")
    r.add_argument("--tool", required=True)
    r.add_argument("--rep", type=int, required=True)
    r.add_argument("--slot", type=int, required=True)
    r.add_argument("--wall", type=float, required=True)
    r.add_argument("--cpu", required=True)
    r.add_argument("--time-file", required=True)
    r.add_argument("--log", required=True)
    r.add_argument("--stats")
    r.add_argument("--demo-cpu", type=float, required=True)
    r.add_argument("--left", type=int, required=True)
    r.add_argument("--machine-busy", type=float, required=True)
    i = sub.add_parser("items")
    i.add_argument("expected", type=int)
    i.add_argument("base")
    i.add_argument("files", nargs="+")
    t = sub.add_parser("report")
    t.add_argument("results")
    t.add_argument("machine")
    t.add_argument("breakdown", nargs="*")
    sa = sub.add_parser("sample")
    sa.add_argument("cgroup")
    sa.add_argument("out")
    sa.add_argument("tool")
    c = sub.add_parser("add-cgroup-cpu")
    c.add_argument("file")
    c.add_argument("cpu", type=float)
    args = p.parse_args()
    {"record": record, "items": items, "report": report, "sample": sample, "add-cgroup-cpu": add_cgroup_cpu}[args.cmd](args)


def add_cgroup_cpu(args):
    """Notes the cgroup's own total in a breakdown file."""
    b = json.load(open(args.file))
    b["cgroup_cpu_s"] = args.cpu
    json.dump(b, open(args.file, "w"))


if __name__ == "__main__":
    main()
