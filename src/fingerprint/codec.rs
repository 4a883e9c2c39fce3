//! Encoding text (a query or fragment) the way Python's codec would, for
//! `safe_url_string(url, encoding)`.
//!
//! The caller names the page's encoding as encoding_rs sees it; Scrapy
//! names it through `w3lib.encoding.resolve_encoding`, which picks a
//! different Python codec for some encodings (a GBK page is encoded as
//! `gb18030`, a Shift_JIS page as `cp932`, `latin1` as `cp1252`). This
//! module encodes as that Python codec does: with encoding_rs's encoder,
//! corrected by a short table of the characters where the two disagree.
//!
//! Exact for UTF-8, UTF-16LE/BE, GBK and GB18030, EUC-KR, KOI8-R/U, IBM866,
//! macintosh, every ISO-8859-x and windows-125x/874 encoding. Not corrected
//! (encoding_rs's tables are used as they are) for Shift_JIS vs `cp932`,
//! EUC-JP vs `euc_jp`, ISO-2022-JP and Big5 vs `big5hkscs`, where Python
//! additionally encodes private-use, JIS X 0212 or HKSCS characters and maps
//! a few symbols differently (e.g. `¥` on a Shift_JIS page). The ignored
//! test `python_codec_dump_matches` compares every code point with a dump
//! made by `tests/data/fingerprint/dump_codec.py`.

use std::borrow::Cow;

use encoding_rs::{
    Encoding, GB18030, GBK, KOI8_U, UTF_16BE, UTF_16LE, UTF_8, WINDOWS_1250, WINDOWS_1251,
    WINDOWS_1252, WINDOWS_1253, WINDOWS_1254, WINDOWS_1255, WINDOWS_1257, WINDOWS_1258,
    WINDOWS_874,
};

/// A character Python's codec handles differently from encoding_rs: its
/// bytes there, or `None` if Python cannot encode it.
type Override = (char, Option<&'static [u8]>);

/// `gb18030` in Python follows GB18030-2005; encoding_rs follows the WHATWG
/// standard, which adopted the GB18030-2022 mappings for these.
const GB18030_2005: &[Override] = &[
    ('\u{1e3f}', Some(&[0x81, 0x35, 0xf4, 0x37])),
    ('\u{9fb4}', Some(&[0x82, 0x35, 0x90, 0x37])),
    ('\u{9fb5}', Some(&[0x82, 0x35, 0x90, 0x38])),
    ('\u{9fb6}', Some(&[0x82, 0x35, 0x90, 0x39])),
    ('\u{9fb7}', Some(&[0x82, 0x35, 0x91, 0x30])),
    ('\u{9fb8}', Some(&[0x82, 0x35, 0x91, 0x31])),
    ('\u{9fb9}', Some(&[0x82, 0x35, 0x91, 0x32])),
    ('\u{9fba}', Some(&[0x82, 0x35, 0x91, 0x33])),
    ('\u{9fbb}', Some(&[0x82, 0x35, 0x91, 0x34])),
    ('\u{e5e5}', Some(&[0xa3, 0xa0])),
    ('\u{e7c7}', Some(&[0xa8, 0xbc])),
    ('\u{fe10}', Some(&[0x84, 0x31, 0x82, 0x36])),
    ('\u{fe11}', Some(&[0x84, 0x31, 0x82, 0x37])),
    ('\u{fe12}', Some(&[0x84, 0x31, 0x82, 0x38])),
    ('\u{fe13}', Some(&[0x84, 0x31, 0x82, 0x39])),
    ('\u{fe14}', Some(&[0x84, 0x31, 0x83, 0x30])),
    ('\u{fe15}', Some(&[0x84, 0x31, 0x83, 0x31])),
    ('\u{fe16}', Some(&[0x84, 0x31, 0x83, 0x32])),
    ('\u{fe17}', Some(&[0x84, 0x31, 0x83, 0x33])),
    ('\u{fe18}', Some(&[0x84, 0x31, 0x83, 0x34])),
    ('\u{fe19}', Some(&[0x84, 0x31, 0x83, 0x35])),
];

/// Python's `koi8_u` keeps box-drawing characters where WHATWG's KOI8-U
/// has the Belarusian/Ukrainian short U.
const KOI8_U_PYTHON: &[Override] = &[
    ('\u{40e}', None),
    ('\u{45e}', None),
    ('\u{255d}', Some(&[0xae])),
    ('\u{256c}', Some(&[0xbe])),
];

// WHATWG maps the bytes a windows-* code page leaves undefined to the C1
// control of the same value; Python's cp* codecs refuse those controls.
const CP874_UNDEFINED: &[Override] = &[
    ('\u{81}', None),
    ('\u{82}', None),
    ('\u{83}', None),
    ('\u{84}', None),
    ('\u{86}', None),
    ('\u{87}', None),
    ('\u{88}', None),
    ('\u{89}', None),
    ('\u{8a}', None),
    ('\u{8b}', None),
    ('\u{8c}', None),
    ('\u{8d}', None),
    ('\u{8e}', None),
    ('\u{8f}', None),
    ('\u{90}', None),
    ('\u{98}', None),
    ('\u{99}', None),
    ('\u{9a}', None),
    ('\u{9b}', None),
    ('\u{9c}', None),
    ('\u{9d}', None),
    ('\u{9e}', None),
    ('\u{9f}', None),
];
const CP1250_UNDEFINED: &[Override] = &[
    ('\u{81}', None),
    ('\u{83}', None),
    ('\u{88}', None),
    ('\u{90}', None),
    ('\u{98}', None),
];
const CP1251_UNDEFINED: &[Override] = &[('\u{98}', None)];
const CP1252_UNDEFINED: &[Override] = &[
    ('\u{81}', None),
    ('\u{8d}', None),
    ('\u{8f}', None),
    ('\u{90}', None),
    ('\u{9d}', None),
];
const CP1253_UNDEFINED: &[Override] = &[
    ('\u{81}', None),
    ('\u{88}', None),
    ('\u{8a}', None),
    ('\u{8c}', None),
    ('\u{8d}', None),
    ('\u{8e}', None),
    ('\u{8f}', None),
    ('\u{90}', None),
    ('\u{98}', None),
    ('\u{9a}', None),
    ('\u{9c}', None),
    ('\u{9d}', None),
    ('\u{9e}', None),
    ('\u{9f}', None),
];
const CP1254_UNDEFINED: &[Override] = &[
    ('\u{81}', None),
    ('\u{8d}', None),
    ('\u{8e}', None),
    ('\u{8f}', None),
    ('\u{90}', None),
    ('\u{9d}', None),
    ('\u{9e}', None),
];
/// Also U+05BA HEBREW POINT HOLAM HASER FOR VAV, which cp1255 predates.
const CP1255_UNDEFINED: &[Override] = &[
    ('\u{81}', None),
    ('\u{8a}', None),
    ('\u{8c}', None),
    ('\u{8d}', None),
    ('\u{8e}', None),
    ('\u{8f}', None),
    ('\u{90}', None),
    ('\u{9a}', None),
    ('\u{9c}', None),
    ('\u{9d}', None),
    ('\u{9e}', None),
    ('\u{9f}', None),
    ('\u{5ba}', None),
];
const CP1257_UNDEFINED: &[Override] = &[
    ('\u{81}', None),
    ('\u{83}', None),
    ('\u{88}', None),
    ('\u{8a}', None),
    ('\u{8c}', None),
    ('\u{90}', None),
    ('\u{98}', None),
    ('\u{9a}', None),
    ('\u{9c}', None),
    ('\u{9f}', None),
];
const CP1258_UNDEFINED: &[Override] = &[
    ('\u{81}', None),
    ('\u{8a}', None),
    ('\u{8d}', None),
    ('\u{8e}', None),
    ('\u{8f}', None),
    ('\u{90}', None),
    ('\u{9a}', None),
    ('\u{9d}', None),
    ('\u{9e}', None),
];

/// The encoder to use for a page in `encoding` and how Python differs from it.
fn python_codec(encoding: &'static Encoding) -> (&'static Encoding, &'static [Override]) {
    // Scrapy resolves GBK (and GB2312) pages to Python's gb18030 codec, which
    // can encode every character; encoding_rs's GBK encoder cannot.
    if encoding == GBK || encoding == GB18030 {
        return (GB18030, GB18030_2005);
    }
    let overrides: &[Override] = match encoding {
        e if e == KOI8_U => KOI8_U_PYTHON,
        e if e == WINDOWS_874 => CP874_UNDEFINED,
        e if e == WINDOWS_1250 => CP1250_UNDEFINED,
        e if e == WINDOWS_1251 => CP1251_UNDEFINED,
        e if e == WINDOWS_1252 => CP1252_UNDEFINED,
        e if e == WINDOWS_1253 => CP1253_UNDEFINED,
        e if e == WINDOWS_1254 => CP1254_UNDEFINED,
        e if e == WINDOWS_1255 => CP1255_UNDEFINED,
        e if e == WINDOWS_1257 => CP1257_UNDEFINED,
        e if e == WINDOWS_1258 => CP1258_UNDEFINED,
        _ => &[],
    };
    (encoding, overrides)
}

/// Python's `text.encode(codec)` with strict errors, where `codec` is what
/// Scrapy resolves `encoding` to; `None` where Python raises
/// `UnicodeEncodeError`.
pub(super) fn encode<'a>(text: &'a str, encoding: &'static Encoding) -> Option<Cow<'a, [u8]>> {
    if encoding == UTF_8 || (text.is_ascii() && encoding.is_ascii_compatible()) {
        return Some(Cow::Borrowed(text.as_bytes()));
    }
    // encoding_rs can only decode UTF-16 (its encoder emits UTF-8), so
    // encode it by hand, without a BOM, as `utf-16-le`/`-be`.
    if encoding == UTF_16LE || encoding == UTF_16BE {
        let little = encoding == UTF_16LE;
        let units = text.encode_utf16();
        let bytes = units
            .flat_map(|u| {
                if little {
                    u.to_le_bytes()
                } else {
                    u.to_be_bytes()
                }
            })
            .collect();
        return Some(Cow::Owned(bytes));
    }
    let (encoder, overrides) = python_codec(encoding);
    if !text.chars().any(|c| lookup(overrides, c).is_some()) {
        return encode_strict(text, encoder);
    }
    // Encode the runs between overridden characters with encoding_rs; all
    // encodings with overrides are stateless, so runs can be joined.
    let mut out = Vec::with_capacity(text.len() * 2);
    let mut run_start = 0;
    for (i, c) in text.char_indices() {
        if let Some(bytes) = lookup(overrides, c) {
            out.extend_from_slice(&encode_strict(&text[run_start..i], encoder)?);
            out.extend_from_slice(bytes?);
            run_start = i + c.len_utf8();
        }
    }
    out.extend_from_slice(&encode_strict(&text[run_start..], encoder)?);
    Some(Cow::Owned(out))
}

fn lookup(overrides: &[Override], c: char) -> Option<Option<&'static [u8]>> {
    overrides
        .iter()
        .find(|&&(k, _)| k == c)
        .map(|&(_, bytes)| bytes)
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
    use encoding_rs::SHIFT_JIS;

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
    fn utf16_without_bom() {
        assert_eq!(hex("aé", UTF_16LE).as_deref(), Some("6100e900"));
        assert_eq!(hex("aé", UTF_16BE).as_deref(), Some("006100e9"));
    }

    /// Compares every code point with a dump of the Python codec Scrapy
    /// would use: `python3 tests/data/fingerprint/dump_codec.py LABEL > F`,
    /// then run this test with `FINGERPRINT_CODEC_DUMP=F`.
    #[test]
    #[ignore = "needs FINGERPRINT_CODEC_DUMP=<file made by dump_codec.py>"]
    fn python_codec_dump_matches() {
        let Ok(path) = std::env::var("FINGERPRINT_CODEC_DUMP") else {
            panic!("set FINGERPRINT_CODEC_DUMP to a file made by dump_codec.py");
        };
        let dump =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        let mut lines = dump.lines();
        let label = lines.next().unwrap_or_default();
        let Some(encoding) = Encoding::for_label(label.as_bytes()) else {
            panic!("{path}: unknown encoding label {label:?}");
        };
        let mut mismatches = Vec::new();
        for line in lines {
            let Some((cp, expected)) = line.split_once(' ') else {
                continue;
            };
            let Some(c) = u32::from_str_radix(cp, 16).ok().and_then(char::from_u32) else {
                continue;
            };
            let actual = hex(&c.to_string(), encoding).unwrap_or_else(|| "E".to_owned());
            if actual != expected {
                mismatches.push(format!("U+{cp}: python {expected}, ours {actual}"));
            }
        }
        assert!(
            mismatches.is_empty(),
            "{label}: {} mismatches, e.g. {:?}",
            mismatches.len(),
            &mismatches[..mismatches.len().min(20)]
        );
    }
}
