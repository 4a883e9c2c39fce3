"""The Redis commands each commit script call runs, by how many pages the
call carried, in MONITOR recordings (record.sh, or `RECORD=DIR
scripts/bench/shards.sh`: MONITOR shows the commands a script runs as
`[0 lua]` lines after its FCALL). A call's fixed part is what a one-page
call runs; what a page adds is the rise from there. Prints, per pages in
a call (9 and more together), the calls, the commands per call and the
most frequent commands per call.

    python3 scripts/bench/replay/commit_commands.py REC.mon [REC2.mon ...]
"""
import collections
import re
import sys

from commit_sizes import pages_argument
from replay import LINE, arguments

# Calls of more pages than this are counted together.
MOST = 9


def tally(paths, index):
    """{pages (capped at MOST): [calls, Counter of commands run in them]}."""
    by_pages = collections.defaultdict(lambda: [0, collections.Counter()])
    for path in paths:
        current = None
        for line in open(path, encoding='latin-1'):
            m = LINE.match(line.rstrip('\n'))
            if not m:
                continue
            args = arguments(m.group(4))
            if not args:
                continue
            if m.group(3) == 'lua':
                if current is not None:
                    current[1][args[0].upper().decode('latin-1')] += 1
                continue
            current = None
            if args[0].upper() == b'FCALL' and args[1].endswith(b'_commit'):
                argv = args[3 + int(args[2]):]
                current = by_pages[min(int(argv[index - 1]), MOST)]
                current[0] += 1
    return by_pages


def main():
    paths = sys.argv[1:]
    if not paths:
        sys.exit(__doc__)
    by_pages = tally(paths, pages_argument(paths))
    print('| pages per call | calls | commands per call | the most frequent, per call |')
    print('|---:|---:|---:|---|')
    for pages in sorted(by_pages):
        calls, run = by_pages[pages]
        top = ', '.join(f'{c} {n / calls:.1f}' for c, n in run.most_common(8))
        label = f'{pages}+' if pages == MOST else str(pages)
        print(f'| {label} | {calls} | {sum(run.values()) / calls:.1f} | {top} |')


if __name__ == '__main__':
    main()
