"""The bookkeeping of scripts/bench/render/compare.sh.

    measure.py record RESULTS --tool T --rep N --slot S --wall W --cpu "TOTAL USER SYS"
                      --time-file F --log F [--stats F] --demo-cpu SECONDS --left N
        appends one run's figures to RESULTS (JSON Lines);
    measure.py items EXPECTED BASE FILE...
        checks that every item file holds EXPECTED items and the same ones
        as the first (a multiset of JSON objects, keys sorted, the demo
        server's address in `url` replaced, URLs normalized); exits 1 if not;
    measure.py report RESULTS MACHINE
        prints the per-run figures and the table of medians (Markdown).
"""

import argparse
import collections
import json
import re
import statistics
import sys
from urllib.parse import quote, unquote, urlsplit, urlunsplit


def record(args):
    elapsed, time_user, time_sys = (float(x) for x in open(args.time_file).read().split()[-3:])
    total, user, system = (float(x) for x in args.cpu.split())
    log = open(args.log, encoding="utf-8", errors="replace").read()
    if args.tool == "crawlworker":
        # The stats the worker logs when the crawl is drained.
        stat = lambda name: int(re.search(rf"^\s*{re.escape(name)}: (\d+)", log, re.M).group(1))
        pages, items = stat("render/page_count"), stat("item_scraped_count")
        crawl_s = float(re.search(r"^\s*elapsed_time_seconds: ([\d.]+)", log, re.M).group(1))
        failed = int(re.search(r"(\d+) requests failed for good", log).group(1))
    else:
        stats = json.load(open(args.stats))
        pages, items, failed, crawl_s = stats["pages"], stats["items"], stats["failed"], stats["seconds"]
    rec = {
        "tool": args.tool,
        "rep": args.rep,
        "slot": args.slot,
        "pages": pages,
        "items": items,
        "failed": failed,
        "wall_s": round(args.wall, 3),
        "crawl_s": round(crawl_s, 3),
        "cpu_s": total,
        "cpu_user_s": user,
        "cpu_sys_s": system,
        "time_cpu_s": round(time_user + time_sys, 3),
        "demo_cpu_s": args.demo_cpu,
        "left_after_exit": args.left,
    }
    with open(args.results, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(
        f"   {args.tool:<11} run {args.rep}: {pages} pages, {items} items, "
        f"{rec['wall_s']:.2f} s wall, {total:.2f} CPU s "
        f"({1000 * total / max(pages, 1):.0f} ms/page; GNU time saw {rec['time_cpu_s']:.2f} s)"
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


def report(args):
    runs = [json.loads(line) for line in open(args.results)]
    tools = ["crawlworker", "crawlee"]
    names = {"crawlworker": "crawlworker", "crawlee": "Crawlee"}
    by = {t: [r for r in runs if r["tool"] == t] for t in tools}

    print("\n### Per run\n")
    print("| tool | run | order | pages | items | wall s | pages/s | CPU s (tree) | user / sys s | CPU ms/page | GNU time CPU s | demo server CPU s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(runs, key=lambda r: (r["rep"], r["slot"])):
        print(
            f"| {names[r['tool']]} | {r['rep']} | {r['slot']} | {r['pages']} | {r['items']} "
            f"| {r['wall_s']:.2f} | {r['pages'] / r['wall_s']:.2f} | {r['cpu_s']:.2f} "
            f"| {r['cpu_user_s']:.2f} / {r['cpu_sys_s']:.2f} | {1000 * r['cpu_s'] / r['pages']:.0f} "
            f"| {r['time_cpu_s']:.2f} | {r['demo_cpu_s']:.2f} |"
        )

    def med(tool, f):
        return statistics.median(f(r) for r in by[tool])

    rows = [
        ("pages rendered", lambda r: r["pages"], "{:.0f}", False),
        ("items", lambda r: r["items"], "{:.0f}", False),
        ("wall time, s", lambda r: r["wall_s"], "{:.2f}", True),
        ("pages/s", lambda r: r["pages"] / r["wall_s"], "{:.2f}", True),
        ("**CPU s, crawler + all its Chromium processes**", lambda r: r["cpu_s"], "{:.2f}", True),
        ("  of which user / system", None, None, False),
        ("**CPU ms per page**", lambda r: 1000 * r["cpu_s"] / r["pages"], "{:.0f}", True),
        ("GNU time's CPU s (crawler + waited-for children only)", lambda r: r["time_cpu_s"], "{:.2f}", False),
        ("demo server CPU s (same work asked?)", lambda r: r["demo_cpu_s"], "{:.2f}", False),
    ]
    reps = len(by["crawlworker"])
    print(f"\n### Medians over {reps} run(s) per tool\n")
    print("| | crawlworker | Crawlee (PuppeteerCrawler) | crawlworker ÷ Crawlee |")
    print("|---|---:|---:|---:|")
    for label, f, fmt, ratio in rows:
        if f is None:
            cells = [
                f"{med(t, lambda r: r['cpu_user_s']):.2f} / {med(t, lambda r: r['cpu_sys_s']):.2f}"
                for t in tools
            ]
            print(f"| {label} | {cells[0]} | {cells[1]} | |")
            continue
        a, b = med("crawlworker", f), med("crawlee", f)
        r = f"{a / b:.2f}×" if ratio and b else ""
        print(f"| {label} | {fmt.format(a)} | {fmt.format(b)} | {r} |")
    print()
    print(open(args.machine).read().rstrip())


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
    i = sub.add_parser("items")
    i.add_argument("expected", type=int)
    i.add_argument("base")
    i.add_argument("files", nargs="+")
    t = sub.add_parser("report")
    t.add_argument("results")
    t.add_argument("machine")
    args = p.parse_args()
    {"record": record, "items": items, "report": report}[args.cmd](args)


if __name__ == "__main__":
    main()
