//! Encoding text (a query or fragment) the way Python's codec would, for
//! `safe_url_string(url, encoding)`.
//!
//! The caller names the page's encoding as encoding_rs sees it; Scrapy
//! names it through `w3lib.encoding.resolve_encoding`, which picks a
//! different Python codec for some encodings (a GBK page is encoded as
//! `gb18030`, Shift_JIS as `cp932`, Big5 as `big5hkscs`, `latin1` as
//! `cp1252`). This module encodes as that Python codec does: with
//! encoding_rs's encoder, corrected by the generated tables in
//! [`super::codec_tables`] for the characters where the two disagree.
//!
//! The only encodings left as encoding_rs has them are x-mac-cyrillic,
//! ISO-8859-8-I, x-user-defined and replacement, for which Scrapy has no
//! codec at all. The ignored test `python_codec_dump_matches`
//! compares every code point with a dump made by
//! `crates/scrapy-url/gen/dump_codec.py`.

use std::borrow::Cow;

use encoding_rs::{Encoding, BIG5, GB18030, GBK, ISO_2022_JP, UTF_16BE, UTF_16LE, UTF_8};

use super::codec_tables::{Override, CODEC_OVERRIDES};

/// Scrapy resolves GBK (and GB2312) pages to Python's gb18030 codec, which
/// can encode every character; encoding_rs's GBK encoder cannot.
fn encoder_for(encoding: &'static Encoding) -> &'static Encoding {
    if encoding == GBK {
        GB18030
    } else {
        encoding
    }
}

/// Python's big5hkscs encodes these base + combining mark pairs as one
/// character each (HKSCS has precomposed forms Unicode lacks).
const BIG5HKSCS_PAIRS: &[(char, char, &[u8])] = &[
    ('\u{ca}', '\u{304}', b"\x88\x62"),
    ('\u{ca}', '\u{30c}', b"\x88\x64"),
    ('\u{ea}', '\u{304}', b"\x88\xa3"),
    ('\u{ea}', '\u{30c}', b"\x88\xa5"),
];

/// The characters Python's `iso2022_jp` maps to a JIS X 0208 code that
/// encoding_rs reaches through another character, with that character (e.g.
/// Python encodes `¢` where encoding_rs encodes the fullwidth `￠`).
const ISO_2022_JP_SWAPS: &[(char, char)] = &[
    ('\u{a2}', '\u{ffe0}'),
    ('\u{a3}', '\u{ffe1}'),
    ('\u{ac}', '\u{ffe2}'),
    ('\u{2016}', '\u{2225}'),
    ('\u{301c}', '\u{ff5e}'),
];

/// Python's `text.encode(codec)` with strict errors, where `codec` is what
/// Scrapy resolves `encoding` to; `None` where Python raises
/// `UnicodeEncodeError`.
pub(super) fn encode<'a>(text: &'a str, encoding: &'static Encoding) -> Option<Cow<'a, [u8]>> {
    if encoding == UTF_8 || (text.is_ascii() && encoding.is_ascii_compatible()) {
        return Some(Cow::Borrowed(text.as_bytes()));
    }
    if encoding == UTF_16LE || encoding == UTF_16BE {
        return Some(Cow::Owned(encode_utf16(text, encoding == UTF_16LE)));
    }
    let encoder = encoder_for(encoding);
    let overrides = overrides_for(encoder);
    let pairs = if encoder == BIG5 {
        BIG5HKSCS_PAIRS
    } else {
        &[]
    };
    if encoder == ISO_2022_JP {
        return encode_iso_2022_jp(text, overrides);
    }
    let is_special =
        |c: char| lookup(overrides, c).is_some() || pairs.iter().any(|&(base, _, _)| base == c);
    if !text.chars().any(is_special) {
        return encode_strict(text, encoder);
    }
    // Encode the runs between special characters with encoding_rs. The
    // encoding is stateless, so the runs can simply be joined.
    let mut out = Vec::with_capacity(text.len() * 2);
    let mut run_start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let replacement = match pairs
            .iter()
            .find(|&&(base, mark, _)| base == c && Some(mark) == next)
        {
            Some(&(_, mark, bytes)) => {
                chars.next();
                Some((bytes, c.len_utf8() + mark.len_utf8()))
            }
            None => match lookup(overrides, c) {
                Some(bytes) => Some((bytes?, c.len_utf8())),
                None => None,
            },
        };
        if let Some((bytes, len)) = replacement {
            out.extend_from_slice(&encode_strict(&text[run_start..i], encoder)?);
            out.extend_from_slice(bytes);
            run_start = i + len;
        }
    }
    out.extend_from_slice(&encode_strict(&text[run_start..], encoder)?);
    Some(Cow::Owned(out))
}

/// ISO-2022-JP as Python's `iso2022_jp` writes it: ASCII always in the
/// ASCII set (encoding_rs stays in JIS X 0201 Roman for letters both sets
/// share), a designation escape only when the set changes, and a return to
/// ASCII at the end. Each non-ASCII character's set and bytes come from
/// encoding_rs, which agrees with Python on them once the refusals and
/// swaps are applied.
fn encode_iso_2022_jp<'a>(text: &'a str, refusals: &[Override]) -> Option<Cow<'a, [u8]>> {
    const TO_ASCII: &[u8] = b"\x1b(B";
    let mut out = Vec::with_capacity(text.len() * 2);
    let mut current: &[u8] = TO_ASCII;
    let mut buf = [0; 4];
    for c in text.chars() {
        if c.is_ascii() {
            if current != TO_ASCII {
                out.extend_from_slice(TO_ASCII);
                current = TO_ASCII;
            }
            out.push(c as u8);
            continue;
        }
        if lookup(refusals, c).is_some() {
            return None;
        }
        let c = ISO_2022_JP_SWAPS
            .iter()
            .find(|&&(from, _)| from == c)
            .map_or(c, |&(_, to)| to);
        // encoding_rs writes one character as: designation (3 bytes),
        // payload, and the 3-byte return to ASCII.
        let (encoded, _, unmappable) = ISO_2022_JP.encode(c.encode_utf8(&mut buf));
        if unmappable || encoded.len() < 7 {
            return None;
        }
        let (designation, rest) = encoded.split_at(3);
        let payload = &rest[..rest.len() - 3];
        if current != designation {
            out.extend_from_slice(designation);
            current = designation_static(designation)?;
        }
        out.extend_from_slice(payload);
    }
    if current != TO_ASCII {
        out.extend_from_slice(TO_ASCII);
    }
    Some(Cow::Owned(out))
}

/// The designation escapes encoding_rs's ISO-2022-JP encoder emits, as
/// `'static` slices so the current one can outlive each character's buffer.
fn designation_static(designation: &[u8]) -> Option<&'static [u8]> {
    const DESIGNATIONS: [&[u8]; 3] = [b"\x1b$B", b"\x1b(J", b"\x1b(B"];
    DESIGNATIONS.into_iter().find(|&d| d == designation)
}

/// encoding_rs can only decode UTF-16 (its encoder emits UTF-8), so encode
/// it by hand, without a BOM, as Python's `utf-16-le`/`-be`.
fn encode_utf16(text: &str, little_endian: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 2);
    for unit in text.encode_utf16() {
        let bytes = if little_endian {
            unit.to_le_bytes()
        } else {
            unit.to_be_bytes()
        };
        out.extend_from_slice(&bytes);
    }
    out
}

/// The generated corrections for `encoder`, sorted by character.
fn overrides_for(encoder: &'static Encoding) -> &'static [Override] {
    CODEC_OVERRIDES
        .iter()
        .find(|&&(name, _)| name == encoder.name())
        .map_or(&[], |&(_, table)| table)
}

fn lookup(overrides: &[Override], c: char) -> Option<Option<&'static [u8]>> {
    overrides
        .binary_search_by_key(&c, |&(k, _)| k)
        .ok()
        .map(|i| overrides[i].1)
}

/// encoding_rs would write an HTML numeric character reference for a
/// character it cannot encode; Python raises, so report `None`.
fn encode_strict<'a>(text: &'a str, encoder: &'static Encoding) -> Option<Cow<'a, [u8]>> {
    let (bytes, _, had_unmappable) = encoder.encode(text);
    (!had_unmappable).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use encoding_rs::{SHIFT_JIS, WINDOWS_1252};

    fn hex(text: &str, encoding: &'static Encoding) -> Option<String> {
        encode(text, encoding).map(hex::encode)
    }

    #[test]
    fn gbk_pages_encode_as_gb18030_2005() {
        assert_eq!(hex("中", GBK).as_deref(), Some("d6d0"));
        assert_eq!(hex("😀", GBK).as_deref(), Some("9439fc36"));
        assert_eq!(hex("aḿb", GB18030).as_deref(), Some("618135f43762"));
    }

    #[test]
    fn python_refusals() {
        assert_eq!(hex("a\u{81}", WINDOWS_1252), None);
        assert_eq!(hex("€", WINDOWS_1252).as_deref(), Some("80"));
        assert_eq!(hex("中", WINDOWS_1252), None);
        assert_eq!(hex("é", SHIFT_JIS), None);
    }

    #[test]
    fn shift_jis_pages_encode_as_cp932() {
        // NEC-selected rows for IBM extension kanji, the wave dash and the
        // private use area, where WHATWG's Shift_JIS differs from cp932.
        assert_eq!(hex("髙〜", SHIFT_JIS).as_deref(), Some("eee08160"));
        assert_eq!(hex("a\u{e000}", SHIFT_JIS).as_deref(), Some("61f040"));
        assert_eq!(hex("¥", SHIFT_JIS), None);
    }

    #[test]
    fn big5_pages_encode_as_big5hkscs() {
        assert_eq!(hex("Ê\u{304}Ê", BIG5).as_deref(), Some("88628866"));
        assert_eq!(hex("€", BIG5), None);
    }

    #[test]
    fn iso_2022_jp_switches_like_python() {
        let jis = encoding_rs::ISO_2022_JP;
        assert_eq!(hex("¥x", jis).as_deref(), Some("1b284a5c1b284278"));
        assert_eq!(
            hex("日本a¢", jis).as_deref(),
            Some("1b2442467c4b5c1b2842611b244221711b2842")
        );
        assert_eq!(hex("ｶ", jis), None);
    }

    #[test]
    fn utf16_without_bom() {
        assert_eq!(hex("aé", UTF_16LE).as_deref(), Some("6100e900"));
        assert_eq!(hex("aé", UTF_16BE).as_deref(), Some("006100e9"));
    }
}
