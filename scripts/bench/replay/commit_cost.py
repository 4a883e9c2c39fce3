"""What a commit script call costs Redis, per call and per page: a
recording (record.sh) replayed into a redis-server whose slow log times
every command, then each commit call's time (the slow log's: the
script's own work, not reading or answering it) fitted to the pages it
carried by least squares, time = F + P x pages. Prints F, P and the
median time of the calls by pages carried.

    scripts/bench/replay/commit_cost.sh /tmp/rec.mon

Run by commit_cost.sh, which starts the Redis and replays into it; this
reads the slow log afterwards:

    python3 scripts/bench/replay/commit_cost.py REC.mon PORT
"""
import collections
import socket
import statistics
import sys

from commit_sizes import commits, pages_argument
from replay import ErrorReply, read_reply, request


def slow_log(port):
    """Every slow log entry's (id, µs, command name, function name)."""
    sock = socket.create_connection(('127.0.0.1', port))
    sock.sendall(request([b'SLOWLOG', b'GET', b'-1']))
    entries = read_reply(sock.makefile('rb'))
    if isinstance(entries, ErrorReply):
        sys.exit(f'SLOWLOG GET failed: {entries.decode(errors="replace")}')
    for entry in entries:
        args = entry[3]
        yield int(entry[0]), int(entry[2]), args[0].upper(), args[1] if len(args) > 1 else b''


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rec, port = sys.argv[1], int(sys.argv[2])
    pages = [p for _, p in commits(rec, pages_argument([rec]))]
    timed = sorted((i, us) for i, us, verb, fn in slow_log(port) if verb == b'FCALL' and fn.endswith(b'_commit'))
    if len(timed) != len(pages):
        sys.exit(f'{len(pages)} commit calls recorded, {len(timed)} in the slow log: '
                 'raise slowlog-max-len, or replay into an empty Redis')
    xs, ys = pages, [us for _, us in timed]
    per_page, fixed = statistics.linear_regression(xs, ys)
    print(f'commit calls {len(xs)}, {sum(xs)} pages ({sum(xs) / len(xs):.1f} per call): '
          f'F = {fixed:.1f} us per call, P = {per_page:.1f} us per page')
    by_pages = collections.defaultdict(list)
    for x, y in zip(xs, ys):
        by_pages[min(x, 9)].append(y)
    print('| pages per call | calls | median us |')
    print('|---:|---:|---:|')
    for n in sorted(by_pages):
        print(f'| {n}{"+" if n == 9 else ""} | {len(by_pages[n])} | {statistics.median(by_pages[n]):.0f} |')


if __name__ == '__main__':
    main()
