#!/usr/bin/env python3
"""Dump how the Python codec Scrapy uses for a page charset encodes every
code point, for the ignored Rust test `python_codec_dump_matches`.

    python3 crates/scrapy-url/gen/dump_codec.py gbk > /tmp/gbk.dump
    FINGERPRINT_CODEC_DUMP=/tmp/gbk.dump cargo test --lib python_codec_dump_matches -- --ignored

The first line is the label (looked up with encoding_rs on the Rust side);
then one line per non-ASCII code point: hex code point, then the encoded
bytes in hex or `E` if the codec raises.
"""

import sys

from w3lib.encoding import resolve_encoding


def main():
    label = sys.argv[1]
    codec = resolve_encoding(label)
    if codec is None:
        sys.exit(f"Scrapy has no codec for {label!r}")
    out = [label]
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        try:
            out.append(f"{cp:x} {chr(cp).encode(codec).hex()}")
        except UnicodeEncodeError:
            out.append(f"{cp:x} E")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
