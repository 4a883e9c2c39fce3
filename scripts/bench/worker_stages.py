"""A worker's CPU profile by stage of a page, for
scripts/bench/worker_profile.sh:

    python3 scripts/bench/worker_stages.py REPORT.txt PAGES USER_S SYSTEM_S
    python3 scripts/bench/worker_stages.py --callers SCRIPT.txt PAGES USER_S SYSTEM_S

REPORT.txt is a flat profile (`perf report --sort symbol`): each symbol
goes to the first stage whose pattern its name holds (a generic function
instantiated for a crate's type, `drop_in_place<hyper::…>`, counts for
that crate). SCRIPT.txt is `perf script` of a profile with call graphs:
each sample goes to the stage of the innermost frame of its stack that
belongs to a crate's stage, so allocation, copies, the standard library
and system calls count for the stage that asked for them (tokio's own
work only when no other stage is on the stack). Prints, per stage, its
share of the worker's samples and µs of CPU per page; with SHOW=N, the N
dearest symbols left in "other" (flat profiles only).
"""
import os
import re
import sys

# (stage, pattern over the demangled name), first match wins: the
# specific crates before the generic ones.
STAGES = [
    ('kernel (system calls: sockets, timers, wake-ups)', r'^\[k\]'),
    ('HTML parsing (html5ever)', r'html5ever|markup5ever|tendril|string_cache'),
    ('CSS selection (scraper, selectors)', r'scraper::|selectors::|cssparser'),
    ('transforms (jaq)', r'jaq_'),
    ('regex', r'regex_automata|regex::|regex_syntax|aho_corasick|memchr'),
    ('text decoding (encoding_rs)', r'encoding_rs|chardetng'),
    ('decompression', r'flate2|miniz_oxide|brotli|zstd|async_compression|inflate'),
    ('HTTP client (reqwest, hyper)', r'hyper|reqwest|\bh2::|httparse|http::|want::|tower'),
    ('Redis client (redis crate)', r'\bredis::|combine::'),
    ('JSON (serde_json)', r'serde_json|ryu::|itoa::'),
    ('URLs and fingerprints (url, scrapy_url, sha1)', r'\burl::|idna|percent_encoding|scrapy_url|sha1|digest::|form_urlencoded'),
    ('logging (tracing)', r'tracing'),
    ('task scheduling and I/O (tokio)', r'tokio|mio::|futures_|parking_lot|crossbeam'),
    ('crawlworker: extraction', r'crawlworker::(extract|spider|items|transform|dates)'),
    ('crawlworker: frontier', r'crawlworker::frontier'),
    ('crawlworker: downloader', r'crawlworker::downloader'),
    ('crawlworker: worker and the rest', r'crawlworker'),
    ('allocation (mimalloc, malloc)', r'^\[\.\] _?mi_|malloc|free|realloc|calloc|_int_|tcache'),
    ('memory copies and compares', r'mem(cpy|move|set|cmp|chr)|str(len|cmp|chr)|__mem|__str'),
    ('Rust standard library (generic)', r'\b(core|alloc|std)::|hashbrown|<\[|<T as|<&'),
]

LINE = re.compile(r'^\s*([0-9.]+)%\s+(\[[k.]\])\s+(.*\S)\s*$')


def stage_of(kind, name):
    text = f'{kind} {name}'
    for stage, pattern in STAGES:
        if re.search(pattern, text):
            return stage
    return 'other'


# Stages a sample is not charged to while a crate's stage is on its stack.
GENERIC = {'kernel (system calls: sockets, timers, wake-ups)', 'allocation (mimalloc, malloc)',
           'memory copies and compares', 'Rust standard library (generic)', 'task scheduling and I/O (tokio)',
           'other'}
# A frame of `perf script`: address, symbol+offset, (object).
FRAME = re.compile(r'^\s+[0-9a-f]+ (.*?)(?:\+0x[0-9a-f]+)? \((.*)\)\s*$')


def flat(path):
    """Shares per stage of a flat report, and the symbols left in other."""
    shares, other = {}, []
    for line in open(path, encoding='utf-8', errors='replace'):
        m = LINE.match(line)
        if not m:
            continue
        share, kind, name = float(m.group(1)), m.group(2), m.group(3)
        stage = stage_of(kind, name)
        shares[stage] = shares.get(stage, 0.0) + share
        if stage == 'other':
            other.append((share, name))
    return shares, other


def by_callers(path):
    """Samples per stage of `perf script` output, each charged to the
    innermost frame of a crate's stage (see the module doc)."""
    shares = {}
    for sample in open(path, encoding='utf-8', errors='replace').read().split('\n\n'):
        stages = []
        for line in sample.split('\n')[1:]:
            m = FRAME.match(line)
            if m:
                kind = '[k]' if 'kernel' in m.group(2) else '[.]'
                stages.append(stage_of(kind, m.group(1)))
        if not stages:
            continue
        stage = next((s for s in stages if s not in GENERIC), None)
        if stage is None:
            generic = [s for s in stages if s != 'other']
            stage = 'task scheduling and I/O (tokio)' if 'task scheduling and I/O (tokio)' in generic \
                else (generic[0] if generic else 'other')
        shares[stage] = shares.get(stage, 0) + 1
    return shares, []


def main():
    args = sys.argv[1:]
    callers = args[:1] == ['--callers']
    if callers:
        args = args[1:]
    if len(args) != 4:
        sys.exit(__doc__)
    path, pages, user, system = args[0], int(args[1]), float(args[2]), float(args[3])
    shares, other = by_callers(path) if callers else flat(path)
    total = sum(shares.values()) or 1.0
    cpu_us = (user + system) * 1e6 / max(pages, 1)
    print(f'worker CPU per page: {cpu_us:.1f} µs ({pages / max(user + system, 1e-9):,.0f} pages per CPU-second)')
    print('| stage | share of the worker\'s CPU | µs per page |')
    print('|---|---:|---:|')
    for stage, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f'| {stage} | {share * 100 / total:.1f} % | {cpu_us * share / total:.1f} |')
    for share, name in sorted(other, reverse=True)[:int(os.environ.get('SHOW', '0'))]:
        print(f'    other: {share:.2f} % {name[:120]}')


if __name__ == '__main__':
    main()
