"""The Functions library of a recording, out to a file and back, so that a
change to the scripts can be measured on the same calls without a build:

    python3 scripts/bench/replay/library.py extract REC.mon LIB.lua
    (edit LIB.lua: the library as the worker loaded it, helpers and all)
    python3 scripts/bench/replay/library.py pack LIB.lua EDITED.mon
    REDIS_SERVER=... scripts/bench/replay/instructions.sh REC.mon EDITED.mon

`pack` writes a one-line recording that only loads LIB.lua, which is all
replay.py reads of its OTHER argument. Keep the library's name (its first
line): REC's calls name its functions.
"""
import sys

from replay import library


def escaped(text):
    """`text` as MONITOR quotes an argument (sdscatrepr)."""
    out = []
    for c in text:
        ch = chr(c)
        if ch in '"\\':
            out.append('\\' + ch)
        elif ch == '\n':
            out.append('\\n')
        elif ch == '\r':
            out.append('\\r')
        elif ch == '\t':
            out.append('\\t')
        elif 32 <= c < 127:
            out.append(ch)
        else:
            out.append('\\x%02x' % c)
    return ''.join(out)


def pack(text, path):
    """Writes a one-line recording at `path` that loads the library `text`."""
    with open(path, 'w', encoding='latin-1') as f:
        f.write('0.000000 [0 127.0.0.1:1] "FUNCTION" "LOAD" "REPLACE" "%s"\n' % escaped(text))


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ('extract', 'pack'):
        sys.exit(__doc__)
    if sys.argv[1] == 'extract':
        text, name = library(sys.argv[2])
        with open(sys.argv[3], 'wb') as f:
            f.write(text)
        print(f'{sys.argv[3]}: library {name.decode()}')
    else:
        with open(sys.argv[2], 'rb') as f:
            text = f.read()
        pack(text, sys.argv[3])


if __name__ == '__main__':
    main()
