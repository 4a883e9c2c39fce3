#!/usr/bin/env python3
"""What a worker's memory holds at its peak, by kind of mapping.

    worker_memory.py PID BINARY OUT

Samples /proc/PID/smaps_rollup every 20 ms until the process ends, keeps
the full /proc/PID/smaps of the sample with the most resident memory, and
writes to OUT one line per kind (kB resident at that peak):

- code: the binary's executable pages that were touched (read from the
  file, shared with other workers on the host);
- read-only data: the binary's constants and relocation tables;
- data: the binary's writable data and bss;
- libraries: the shared libraries (libc, the loader, libgcc);
- thread stacks: the runtime's and the blocking pool's threads (an
  anonymous mapping behind a guard page);
- heap: every other anonymous mapping (mimalloc's arenas: pages, DOMs,
  buffers, the connection pools, the tables of the spider);
- other: the main stack, vdso, vvar.

Then the same kinds' anonymous memory ("anonymous <kind>": pages this
process wrote, which no other worker on the host shares: the heap, the
stacks, and the binary's pages the loader relocated at start), its total
("anonymous"), and the thread count at the peak. The rest is file pages,
shared by every worker running the same binary. Only reads /proc.
"""

import collections
import os
import re
import sys
import time

HEADER = re.compile(r'^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$')


def rollup_rss(pid):
    with open(f'/proc/{pid}/smaps_rollup') as f:
        for line in f:
            if line.startswith('Rss:'):
                return int(line.split()[1])
    return 0


def mappings(text):
    """(start, end, perms, path, rss kB, anonymous kB) of each mapping in
    an smaps text."""
    out = []
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            out.append([int(m.group(1), 16), int(m.group(2), 16), m.group(3), m.group(4), 0, 0])
        elif line.startswith('Rss:') and out:
            out[-1][4] = int(line.split()[1])
        elif line.startswith('Anonymous:') and out:
            out[-1][5] = int(line.split()[1])
    return out


def kind(maps, i, binary):
    start, end, perms, path = maps[i][:4]
    if path and os.path.realpath(path) == binary:
        return {'r-xp': 'code', 'r--p': 'read-only data'}.get(perms, 'data')
    if '.so' in path:
        return 'libraries'
    if path.startswith('['):
        return 'heap' if path == '[heap]' else 'other'
    if path:
        return 'other'
    # The binary's bss continues its data in an anonymous mapping.
    if i > 0 and maps[i - 1][1] == start and os.path.realpath(maps[i - 1][3] or '/') == binary:
        return 'data'
    # A thread's stack: read-write, right after its guard page.
    if perms == 'rw-p' and i > 0 and maps[i - 1][2] == '---p' and maps[i - 1][1] == start \
            and maps[i - 1][1] - maps[i - 1][0] <= 64 << 10:
        return 'thread stacks'
    return 'heap'


def main():
    pid, binary, out = int(sys.argv[1]), os.path.realpath(sys.argv[2]), sys.argv[3]
    best, best_text, threads = -1, '', 0
    while True:
        try:
            rss = rollup_rss(pid)
            if rss > best:
                with open(f'/proc/{pid}/smaps') as f:
                    text = f.read()
                with open(f'/proc/{pid}/status') as f:
                    status = f.read()
                best, best_text = rss, text
                threads = int(re.search(r'^Threads:\s+(\d+)', status, re.M).group(1))
        except (FileNotFoundError, ProcessLookupError, AttributeError):
            break
        time.sleep(0.02)
    maps = mappings(best_text)
    kinds, anon = collections.Counter(), collections.Counter()
    for i in range(len(maps)):
        kinds[kind(maps, i, binary)] += maps[i][4]
        anon[kind(maps, i, binary)] += maps[i][5]
    with open(out, 'w') as f:
        f.write(f'peak {best}\nthreads {threads}\nanonymous {sum(anon.values())}\n')
        for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]):
            f.write(f'{k} {v}\n')
        for k, v in sorted(anon.items(), key=lambda kv: -kv[1]):
            f.write(f'anonymous {k} {v}\n')


if __name__ == '__main__':
    main()
