//! Turning response bytes into text with the right character set, in the
//! order browsers and Scrapy use: byte-order mark, the HTTP `Content-Type`
//! charset, `<meta charset>` / `http-equiv` in the first bytes of the page,
//! then statistical detection, then UTF-8.

use std::borrow::Cow;
use std::sync::LazyLock;

use encoding_rs::Encoding;
use serde::Serialize;

/// Where the character set came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CharsetSource {
    Bom,
    Header,
    Meta,
    Detected,
    Default,
    /// Not decoded: the body is binary ([`super::content`]).
    Binary,
}

/// A decoded body: borrowed from the body when it is already valid UTF-8
/// (no second copy of a large page), else a decoded copy.
#[derive(Debug, Clone)]
pub struct Decoded<'a> {
    pub text: Cow<'a, str>,
    pub encoding: &'static Encoding,
    pub source: CharsetSource,
}

/// How far into the page a `<meta>` charset declaration is looked for (the
/// HTML standard's prescan reads 1024 bytes; real pages put long `<title>`s
/// and scripts first, so look further).
const META_PRESCAN: usize = 4096;

static META_CHARSET: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    regex::bytes::Regex::new(r#"(?i)<meta[^>]*?charset\s*=\s*["']?\s*([a-z0-9_:.\-]+)"#)
        .unwrap_or_else(|e| unreachable!("static regex: {e}"))
});

/// The charset parameter of a `Content-Type` value, if it names a known
/// encoding.
pub fn header_charset(content_type: &str) -> Option<&'static Encoding> {
    content_type.split(';').skip(1).find_map(|param| {
        let (k, v) = param.split_once('=')?;
        if !k.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        Encoding::for_label(v.trim().trim_matches(['"', '\'']).as_bytes())
    })
}

/// The encoding a `<meta>` tag near the top of the page declares.
pub fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(META_PRESCAN)];
    let caps = META_CHARSET.captures(head)?;
    let enc = Encoding::for_label(caps.get(1)?.as_bytes())?;
    // A page cannot be UTF-16 and have an ASCII `<meta>`: browsers read UTF-8.
    Some(
        if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
            encoding_rs::UTF_8
        } else {
            enc
        },
    )
}

impl Decoded<'_> {
    /// The text of a binary body: none, so nothing reads it as a page.
    pub fn binary() -> Decoded<'static> {
        Decoded {
            text: Cow::Borrowed(""),
            encoding: encoding_rs::UTF_8,
            source: CharsetSource::Binary,
        }
    }
}

/// Decodes `body`; malformed sequences become U+FFFD, never an error.
pub fn decode<'a>(body: &'a [u8], content_type: Option<&str>) -> Decoded<'a> {
    let (encoding, source, bom_len) = if let Some((enc, len)) = Encoding::for_bom(body) {
        (enc, CharsetSource::Bom, len)
    } else if let Some(enc) = content_type.and_then(header_charset) {
        (enc, CharsetSource::Header, 0)
    } else if let Some(enc) = meta_charset(body) {
        (enc, CharsetSource::Meta, 0)
    } else if body.is_ascii() {
        (encoding_rs::UTF_8, CharsetSource::Default, 0)
    } else {
        let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
        detector.feed(body, true);
        (
            detector.guess(None, chardetng::Utf8Detection::Allow),
            CharsetSource::Detected,
            0,
        )
    };
    let (text, _) = encoding.decode_without_bom_handling(&body[bom_len..]);
    Decoded {
        text,
        encoding,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gbk(s: &str) -> Vec<u8> {
        encoding_rs::GBK.encode(s).0.into_owned()
    }

    #[test]
    fn header_wins_over_meta() {
        let body = gbk("<meta charset=\"utf-8\">中文");
        let d = decode(&body, Some("text/html; charset=GBK"));
        assert_eq!(d.source, CharsetSource::Header);
        assert!(d.text.ends_with("中文"));
    }

    #[test]
    fn meta_charset_and_http_equiv() {
        let body = gbk("<html><head><meta charset=\"gbk\"></head><body>论坛</body>");
        let d = decode(&body, Some("text/html"));
        assert_eq!(
            (d.encoding, d.source),
            (encoding_rs::GBK, CharsetSource::Meta)
        );
        assert!(d.text.contains("论坛"));
        let body =
            gbk("<meta http-equiv=\"Content-Type\" content=\"text/html; charset=gb2312\">帖子");
        assert_eq!(decode(&body, None).encoding, encoding_rs::GBK);
    }

    #[test]
    fn bom_then_detection_then_utf8() {
        let mut body = vec![0xEF, 0xBB, 0xBF];
        body.extend_from_slice("é".as_bytes());
        let d = decode(&body, Some("text/html; charset=latin1"));
        assert_eq!((&*d.text, d.source), ("é", CharsetSource::Bom));
        let long = gbk(&"这是一个没有声明字符集的中文论坛页面，内容足够长以便检测。".repeat(4));
        let d = decode(&long, None);
        assert_eq!(d.source, CharsetSource::Detected);
        assert!(d.text.starts_with("这是一个"), "{}", d.text);
        assert_eq!(decode(b"plain", None).encoding, encoding_rs::UTF_8);
    }
}
