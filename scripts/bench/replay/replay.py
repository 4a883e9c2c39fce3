"""Replays a recording of scripts/bench/replay/record.sh into a Redis.

    python3 scripts/bench/replay/replay.py REC.mon PORT [OTHER.mon]

Sends the recorded commands in their order on one connection (the start
URLs first, as record.sh pushed them), skipping pub/sub and blocking
commands and those scripts ran (MONITOR shows both). With OTHER.mon (a
recording of another build, whose scripts run as Redis Functions), its
Functions library is loaded instead of REC's and REC's FCALLs are sent to
the functions of the same name in it: the same calls, other scripts (as
long as the two builds call their scripts with the same arguments).

With REPLAY_CLOCK=recorded in the environment, the scripts read the
recording's clock instead of Redis's: before each FCALL the replay sets
the time MONITOR stamped on it (the hash replay:clock), and the library's
`redis.call('TIME')` reads that hash. A replay under valgrind runs tens of
times slower than the crawl it replays, so on Redis's clock its leases
and crew places expire mid-replay and its calls take other paths than
the recording's (two replays of one build then differ by about 0.25 % of
their instructions); on the recorded clock every replay of the same calls
takes the same paths. It costs an HSET per call (and the HMGET in place
of TIME), the same for both sides of a comparison.
"""
import os
import re
import socket
import sys

ESCAPES = {'n': b'\n', 'r': b'\r', 't': b'\t', 'a': b'\a', 'b': b'\b', '"': b'"', '\\': b'\\'}
LINE = re.compile(r'^([0-9]+)\.([0-9]+) \[\d+ ([^\]]+)\] (.*)$')
CLOCK_KEY = b'replay:clock'
RECORDED_TIME = b"redis.call('HMGET', '" + CLOCK_KEY + b"', 's', 'us')"
SKIP = {b'SUBSCRIBE', b'UNSUBSCRIBE', b'PSUBSCRIBE', b'PUNSUBSCRIBE', b'MONITOR', b'CLIENT', b'HELLO',
        b'BLPOP', b'BRPOP', b'BLMOVE', b'BLMPOP', b'BZPOPMIN', b'BZPOPMAX', b'BZMPOP'}


def arguments(text):
    """The arguments of a MONITOR line: quoted, with sdscatrepr escapes."""
    out, i = [], 0
    while i < len(text):
        if text[i] != '"':
            i += 1
            continue
        i += 1
        arg = bytearray()
        while text[i] != '"':
            if text[i] == '\\':
                if text[i + 1] == 'x':
                    arg.append(int(text[i + 2:i + 4], 16))
                    i += 4
                else:
                    arg += ESCAPES[text[i + 1]]
                    i += 2
            else:
                arg += text[i].encode('latin-1')
                i += 1
        out.append(bytes(arg))
        i += 1
    return out


def stamped_commands(path):
    """The commands a client sent, each with the time MONITOR stamped on
    it (seconds and microseconds, as TIME gives them)."""
    for line in open(path, encoding='latin-1'):
        m = LINE.match(line.rstrip('\n'))
        if not m or m.group(3) == 'lua':
            continue
        args = arguments(m.group(4))
        if args and args[0].upper() not in SKIP:
            yield (m.group(1).encode(), m.group(2).encode()), args


def commands(path):
    for _, args in stamped_commands(path):
        yield args


def loaded(path):
    """The Functions library a recording loads, or None."""
    for args in commands(path):
        if args[0].upper() == b'FUNCTION' and args[1].upper() == b'LOAD':
            return args[-1]
    return None


def library(path):
    """The Functions library a recording loaded, and its name."""
    text = loaded(path)
    if text is None:
        sys.exit(f'{path} loads no Functions library')
    return text, re.match(rb'#!lua name=(\S+)', text).group(1)


def request(args):
    return b''.join([b'*%d\r\n' % len(args)] + [b'$%d\r\n%s\r\n' % (len(a), a) for a in args])


class ErrorReply(bytes):
    """An error reply's text (after its '-')."""


def read_reply(replies):
    """One RESP2 reply from `replies` (a socket's file): bytes (a status,
    an integer's digits or a bulk string), None (a nil), a list, or an
    ErrorReply."""
    line = replies.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b'$':
        n = int(rest)
        return None if n < 0 else replies.read(n + 2)[:-2]
    if kind == b'*':
        return [read_reply(replies) for _ in range(max(int(rest), 0))]
    if kind == b'-':
        return ErrorReply(rest)
    if kind in (b'+', b':'):
        return rest
    raise RuntimeError(f'unexpected reply {line!r}')


def main():
    rec, port = sys.argv[1], int(sys.argv[2])
    other = library(sys.argv[3]) if len(sys.argv) > 3 else None
    sock = socket.create_connection(('127.0.0.1', port))
    replies = sock.makefile('rb')

    def reply():
        return read_reply(replies)

    # record.sh pushes the start URLs before recording (REC.tasks); a
    # recording without them (scripts/bench/shards.sh RECORD=) has its
    # push in it.
    tasks_file = re.sub(r'\.mon$', '', rec) + '.tasks'
    if os.path.exists(tasks_file):
        tasks = [t.rstrip('\n').encode() for t in open(tasks_file)]
        sock.sendall(request([b'RPUSH', b'bbs:start_urls'] + tasks))
        reply()
    sent = errors = 0
    recorded_clock = os.environ.get('REPLAY_CLOCK') == 'recorded'
    for (seconds, micros), args in stamped_commands(rec):
        verb = args[0].upper()
        if verb == b'FUNCTION' and args[1].upper() == b'LOAD':
            text = other[0] if other else args[-1]
            if recorded_clock:
                text = text.replace(b"redis.call('TIME')", RECORDED_TIME)
            args = args[:-1] + [text]
        elif other and verb == b'FCALL':
            args = [args[0], re.sub(rb'^crawlworker_[0-9a-f]+', other[1], args[1])] + args[2:]
        if recorded_clock and verb == b'FCALL':
            sock.sendall(request([b'HSET', CLOCK_KEY, b's', seconds, b'us', micros]))
            reply()
        sock.sendall(request(args))
        answer = reply()
        sent += 1
        # A first call before the script or library is loaded is refused,
        # as it was when recorded.
        if isinstance(answer, ErrorReply) and b'NOSCRIPT' not in answer and b'Function not found' not in answer:
            errors += 1
            print(f'{args[0].decode()} failed: {answer.decode(errors="replace")}', file=sys.stderr)
    print(f'replayed {sent} commands, {errors} failed', file=sys.stderr)


if __name__ == '__main__':
    main()
