#!/usr/bin/env python3
"""Generate crates/scrapy-url/src/tables.rs: the Unicode data that w3lib 2.5.0's
host handling depends on, taken from the very Python that runs w3lib.

Why generate instead of using a Rust Unicode crate: w3lib normalises hosts
with `unicodedata.normalize("NFKC", ...)` (the interpreter's Unicode
version, 14.0.0 on Python 3.11) and then encodes them with the stdlib
`idna` codec, whose nameprep step uses Unicode 3.2 (`unicodedata.ucd_3_2_0`)
and the `stringprep` tables. Reproducing that byte for byte needs exactly
those versions, which no crate ships.

Run with the interpreter whose behaviour should be mirrored:

    python3 crates/scrapy-url/gen/gen_unicode_tables.py > crates/scrapy-url/src/tables.rs
"""

import stringprep
import sys
import unicodedata
from unicodedata import ucd_3_2_0

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def all_chars():
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # Rust strings cannot hold surrogates
        yield chr(cp)


def lit(s):
    return '"' + "".join(esc(c) for c in s) + '"'


def chr_lit(c):
    return "'" + esc(c) + "'"


def esc(c):
    if c.isascii() and c.isprintable() and c not in "\"'\\":
        return c
    return "\\u{%x}" % ord(c)


def ranges(pred):
    out = []
    start = prev = None
    for c in all_chars():
        cp = ord(c)
        if pred(c):
            if start is not None and cp == prev + 1:
                prev = cp
                continue
            if start is not None:
                out.append((start, prev))
            start = prev = cp
    if start is not None:
        out.append((start, prev))
    return out


def emit_pairs(name, doc, rows, ty, per_line=4):
    print()
    print(f"/// {doc}")
    print("#[rustfmt::skip]")
    print(f"pub(super) static {name}: &[{ty}] = &[")
    for i in range(0, len(rows), per_line):
        print("    " + " ".join(r + "," for r in rows[i : i + per_line]))
    print("];")


def emit_ranges(name, doc, rs):
    rows = [f"({chr_lit(chr(a))}, {chr_lit(chr(b))})" for a, b in rs]
    emit_pairs(name, doc, rows, "(char, char)", per_line=6)


def main():
    nfkd14 = {}
    nfkd32 = {}
    for c in all_chars():
        if HANGUL_FIRST <= ord(c) <= HANGUL_LAST:
            continue  # decomposed algorithmically, as CPython does
        d14 = unicodedata.normalize("NFKD", c)
        d32 = ucd_3_2_0.normalize("NFKD", c)
        if d14 != c:
            nfkd14[c] = d14
        if d32 != d14:
            nfkd32[c] = d32

    ccc = {}
    for c in all_chars():
        v = unicodedata.combining(c)
        if v:
            ccc[ord(c)] = v
    ccc_ranges = []
    for cp in sorted(ccc):
        if ccc_ranges and ccc_ranges[-1][1] == cp - 1 and ccc_ranges[-1][2] == ccc[cp]:
            ccc_ranges[-1][1] = cp
        else:
            ccc_ranges.append([cp, cp, ccc[cp]])

    # Primary composites: a two-character canonical decomposition that NFC
    # composes back (this drops composition exclusions and non-starter
    # decompositions, as CPython's makeunicodedata.py does).
    compose = []
    for c in all_chars():
        if HANGUL_FIRST <= ord(c) <= HANGUL_LAST:
            continue
        d = unicodedata.decomposition(c)
        if not d or d.startswith("<"):
            continue
        parts = [chr(int(x, 16)) for x in d.split()]
        if len(parts) != 2:
            continue
        if unicodedata.combining(parts[0]) != 0:
            continue
        if unicodedata.normalize("NFC", parts[0] + parts[1]) == c:
            compose.append((parts[0], parts[1], c))
    compose.sort()

    b1 = [c for c in all_chars() if stringprep.in_table_b1(c)]
    b2 = {}
    for c in all_chars():
        m = stringprep.map_table_b2(c)
        if m != c:
            b2[c] = m

    def prohibited(c):
        return (
            stringprep.in_table_c12(c)
            or stringprep.in_table_c22(c)
            or stringprep.in_table_c3(c)
            or stringprep.in_table_c4(c)
            or stringprep.in_table_c5(c)
            or stringprep.in_table_c6(c)
            or stringprep.in_table_c7(c)
            or stringprep.in_table_c8(c)
            or stringprep.in_table_c9(c)
        )

    lower = {}
    for c in all_chars():
        if c != "\u03a3" and c.lower() != c:
            lower[c] = c.lower()

    # str.lower() puts U+03A3 in its final form by context, using the
    # Case_Ignorable and Cased properties, which unicodedata does not expose.
    # Probe them through str.lower() itself:
    #   "A" + c + SIGMA is final iff c is case-ignorable or cased;
    #   "A" + SIGMA + c is final iff c is case-ignorable or not cased.
    sigma = "\u03a3"

    def ignorable(c):
        return ("A" + c + sigma).lower().endswith("\u03c2") and ("A" + sigma + c).lower()[1] == "\u03c2"

    def cased(c):
        return not ignorable(c) and ("A" + c + sigma).lower().endswith("\u03c2")

    print("//! Unicode tables for [`super::unicode`], [`super::idna`] and")
    print("//! [`super::pycase`], generated by")
    print("//! `crates/scrapy-url/gen/gen_unicode_tables.py` (@generated): do not edit")
    print("//! by hand.")
    print("//!")
    print(f"//! Python {sys.version.split()[0]}, unicodedata {unicodedata.unidata_version}"
          f" (and {ucd_3_2_0.unidata_version} for nameprep). Each table is sorted so")
    print("//! lookups can binary-search it.")
    emit_pairs(
        "NFKD",
        "Full compatibility decomposition of each character that has one "
        "(Unicode 14, Hangul syllables excluded).",
        [f"({chr_lit(c)}, {lit(d)})" for c, d in sorted(nfkd14.items())],
        "(char, &str)",
    )
    emit_pairs(
        "NFKD_3_2_OVERRIDES",
        "Where `ucd_3_2_0`'s decomposition differs from [`NFKD`] (characters "
        "unassigned in 3.2 map to themselves).",
        [f"({chr_lit(c)}, {lit(d)})" for c, d in sorted(nfkd32.items())],
        "(char, &str)",
    )
    emit_pairs(
        "COMBINING_CLASS",
        "Ranges of characters with a non-zero canonical combining class "
        "(CPython uses the current one even for 3.2 normalisation).",
        [f"({chr_lit(chr(a))}, {chr_lit(chr(b))}, {v})" for a, b, v in ccc_ranges],
        "(char, char, u8)",
    )
    emit_pairs(
        "COMPOSITIONS",
        "Primary composites as (first, second, composite), sorted by pair.",
        [f"({chr_lit(a)}, {chr_lit(b)}, {chr_lit(c)})" for a, b, c in compose],
        "(char, char, char)",
    )
    emit_pairs(
        "NAMEPREP_B1",
        "RFC 3454 table B.1: characters nameprep maps to nothing.",
        [chr_lit(c) for c in b1],
        "char",
        per_line=8,
    )
    emit_pairs(
        "NAMEPREP_B2",
        "`stringprep.map_table_b2` for every character it changes (case "
        "folding for NFKC; uses Python's current `str.lower`).",
        [f"({chr_lit(c)}, {lit(m)})" for c, m in sorted(b2.items())],
        "(char, &str)",
    )
    emit_ranges(
        "NAMEPREP_PROHIBITED",
        "Characters in RFC 3454 tables C.1.2, C.2.2 and C.3 to C.9.",
        ranges(prohibited),
    )
    emit_ranges(
        "BIDI_R_AL",
        "RFC 3454 table D.1: bidirectional category R or AL in Unicode 3.2.",
        ranges(stringprep.in_table_d1),
    )
    emit_pairs(
        "LOWERCASE",
        "`str.lower()` of every character it changes, except U+03A3 (whose "
        "lower case depends on context).",
        [f"({chr_lit(c)}, {lit(m)})" for c, m in sorted(lower.items())],
        "(char, &str)",
    )
    emit_ranges(
        "CASE_IGNORABLE",
        "Characters `str.lower()` skips when deciding on a final sigma "
        "(Case_Ignorable).",
        ranges(ignorable),
    )
    emit_ranges(
        "CASED",
        "Cased characters that are not case-ignorable (the only ones the final "
        "sigma rule looks at).",
        ranges(cased),
    )
    emit_ranges(
        "BIDI_L",
        "RFC 3454 table D.2: bidirectional category L in Unicode 3.2.",
        ranges(stringprep.in_table_d2),
    )


if __name__ == "__main__":
    main()
