"""How many pages each commit script call carried, in MONITOR recordings
(record.sh, or `redis-cli monitor` on each master of a sharded crawl):
per recording the calls, their pages and a histogram of pages per call,
then per worker the calls and pages in each recording. A sharded crawl
whose workers commit to every shard splits their batches that way.

    python3 scripts/bench/replay/commit_sizes.py REC.mon [REC2.mon ...]

The page count's place among a commit's arguments is read from the
library each recording loaded (the `n_pages` line of commit.lua), so the
tool follows protocol.rs without a copy of it.
"""
import collections
import re
import sys

from replay import loaded, stamped_commands


def pages_argument(paths):
    """The ARGV index of a commit's page count in the library the first of
    `paths` to load one loaded (each master of a cluster is sent it)."""
    text = next((t for t in map(loaded, paths) if t), None)
    if text is None:
        sys.exit('none of the recordings loads a Functions library')
    m = re.search(rb'n_pages, n_stats = num\(ARGV\[\d+\]\), num\(ARGV\[(\d+)\]\)', text)
    if not m:
        sys.exit('the library has no n_pages line in its commit function')
    return int(m.group(1))


def commits(path, index):
    """(worker, pages) of every commit call in `path`."""
    for _, args in stamped_commands(path):
        if args[0].upper() != b'FCALL' or not args[1].endswith(b'_commit'):
            continue
        argv = args[3 + int(args[2]):]
        yield argv[0].decode('latin-1').split('|')[0], int(argv[index - 1])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    index = pages_argument(sys.argv[1:])
    per_worker = collections.defaultdict(dict)
    for path in sys.argv[1:]:
        sizes = collections.Counter()
        for worker, pages in commits(path, index):
            sizes[pages] += 1
            calls, total = per_worker[worker].get(path, (0, 0))
            per_worker[worker][path] = (calls + 1, total + pages)
        calls, pages = sum(sizes.values()), sum(k * v for k, v in sizes.items())
        print(f'{path}: {calls} commit calls, {pages} pages, {pages / max(calls, 1):.2f} pages per call')
        print('  pages per call: ' + ', '.join(f'{k}: {v}' for k, v in sorted(sizes.items())))
    print('calls and pages per worker, by recording:')
    for worker, by_path in sorted(per_worker.items()):
        print(f'  {worker}: ' + '; '.join(f'{c} calls {p} pages' for c, p in
                                           (by_path.get(path, (0, 0)) for path in sys.argv[1:])))


if __name__ == '__main__':
    main()
