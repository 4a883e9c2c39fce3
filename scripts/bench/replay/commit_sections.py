"""Where a commit script call's time goes, section by section: the
recorded library with a clock reading (`TIME`) at checkpoints of the
commit function, replayed, then each section's time per call fitted to
the pages the call carried, time = F + P x pages, as commit_cost.py does
for the whole call. Says which parts of commit.lua make its cost per
call (F), which the cost per page (P).

    scripts/bench/replay/commit_sections.sh /tmp/rec.mon

Run by commit_sections.sh, in two steps around its replay:

    python3 scripts/bench/replay/commit_sections.py instrument REC.mon OUT.mon
    python3 scripts/bench/replay/commit_sections.py report PORT

A checkpoint costs about 1.5-2 us (a TIME call from Lua); the report
measures that cost in the same Redis and takes it off every section.
The times are Redis's clock, with microsecond steps: read the means and
fits of many calls, not single calls.
"""
import socket
import statistics
import sys

from library import pack
from replay import ErrorReply, library, read_reply, request

# Checkpoints of commit.lua, in order: a section ends just before the
# first line (after the last checkpoint) that holds its anchor, and is
# named for what it does. The first anchor starts the clock.
SECTIONS = [
    ('begin_call()', None),
    ('-- (Blocks keep short-lived names', 'read the arguments'),
    ('local dupe = dupe_config(', 'check the leases (HMGET)'),
    ('-- The stats the batch counts, read now', 'dupefilter lookups'),
    ('read_queue_sizes(K)', 'read the stats'),
    ("need(K.inflight, 'zset', 'inflight')", 'queue sizes, crew, hosts'),
    ('local next_seq = seq_block(', 'prove the keys'),
    ('local queue_args, data_args = new_list(), new_list()', 'sequence, items, stats'),
    ('count(STAT.SCHEDULER_ENQUEUED, enqueued_all)', 'release, per-page writes'),
    ('local before = #out', 'queue the links'),
    ('-- The requests queued that this commit did not lease', 'lease replacements'),
    ('if lease_next > 0 or release then', 'hand to waiting workers'),
    ('flush_hosts()', 'crew, end of crawl'),
    ('flush_tally(K.stats)', 'per-host writes'),
    ('return out', 'write the stats'),
]

CLOCK = '''
local SECTION_CLOCK, SECTION_ROW, SECTION_ROWS = nil, nil, {}
local function section(name, pages)
  local t = redis.call("TIME")
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if name == nil then
    SECTION_ROW = {}
  elseif SECTION_ROW then
    SECTION_ROW[#SECTION_ROW + 1] = tostring(us - SECTION_CLOCK)
    if pages then
      SECTION_ROWS[#SECTION_ROWS + 1] = tostring(pages) .. ' ' .. table.concat(SECTION_ROW, ' ')
      SECTION_ROW = nil
    end
  end
  SECTION_CLOCK = us
end
REGISTER_FUNCTION{function_name = 'sections_read', callback = function(keys, args)
  bind_globals()
  return SECTION_ROWS
end}
REGISTER_FUNCTION{function_name = 'sections_checkpoint', callback = function(keys, args)
  bind_globals()
  local row = {}
  for i = 1, 1000 do
    section(nil)
    section('')
    row[#row + 1] = SECTION_ROW[1]
  end
  return row
end}
'''


def instrumented(text):
    """The library `text` with the checkpoints in its commit function."""
    lines = text.decode('latin-1').split('\n')
    start = next(i for i, line in enumerate(lines) if "FUNCTION_PREFIX .. 'commit'" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith('REGISTER_FUNCTION'))
    body, at = [], 0
    for line in lines[start:end]:
        if at < len(SECTIONS) and SECTIONS[at][0] in line:
            anchor, name = SECTIONS[at]
            if name is None:
                body += [line, 'section(nil)']
            elif anchor == 'return out':
                body += ['section(%r, n_pages)' % name, line]
            else:
                body += ['section(%r)' % name, line]
            at += 1
        else:
            body.append(line)
    if at < len(SECTIONS):
        sys.exit(f'commit.lua has no line with {SECTIONS[at][0]!r} (after the earlier checkpoints): '
                 'update SECTIONS in commit_sections.py')
    return '\n'.join(lines[:start] + CLOCK.split('\n') + body + lines[end:]).encode('latin-1')


def call(sock, replies, *args):
    sock.sendall(request([a.encode() for a in args]))
    answer = read_reply(replies)
    if isinstance(answer, ErrorReply):
        sys.exit(f'{" ".join(args)} failed: {answer.decode(errors="replace")}')
    return answer


def report(port):
    sock = socket.create_connection(('127.0.0.1', port))
    replies = sock.makefile('rb')
    checkpoint = statistics.median(int(v) for v in call(sock, replies, 'FCALL', 'sections_checkpoint', '0'))
    rows = [[int(v) for v in row.split()] for row in call(sock, replies, 'FCALL', 'sections_read', '0')]
    if not rows:
        sys.exit('no commit call was timed: did the replay run the instrumented library?')
    names = [name for _, name in SECTIONS[1:]]
    pages = [row[0] for row in rows]
    print(f'{len(rows)} commit calls, {statistics.mean(pages):.2f} pages a call; '
          f'a checkpoint costs {checkpoint} us (taken off each section)')
    print(f'{"section":28s} {"us a call":>9s} {"F us":>7s} {"P us/page":>9s}')
    total_f = total_p = total = 0.0
    for i, name in enumerate(names):
        times = [row[i + 1] - checkpoint for row in rows]
        p, f = statistics.linear_regression(pages, times)
        mean = statistics.mean(times)
        total_f, total_p, total = total_f + f, total_p + p, total + mean
        print(f'{name:28s} {mean:9.1f} {f:7.1f} {p:9.1f}')
    print(f'{"the function body":28s} {total:9.1f} {total_f:7.1f} {total_p:9.1f}')


def main():
    if len(sys.argv) == 4 and sys.argv[1] == 'instrument':
        text, _ = library(sys.argv[2])
        pack(instrumented(text), sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == 'report':
        report(int(sys.argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
