//! Whether a response body is text the extractor may read (HTML, XML,
//! JSON, any `text/*`) or binary (an image, an archive, a PDF), told by
//! its `Content-Type`, or by its first bytes when the header is missing or
//! says only `application/octet-stream` ("some bytes"), as Scrapy guesses
//! a response's class from its body then.
//!
//! This module only tells; what is done with a binary body (not parsed,
//! counted, or taken by a rule with `binary = true`) is
//! [`super::extract_within`]'s.

use serde::Serialize;

/// How much of a body without a useful `Content-Type` is looked at: the
/// HTML standard's "resource header" for MIME sniffing.
const SNIFF_BYTES: usize = 1445;

/// Why a response counts as binary, for `parse` and the logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binary {
    /// The response's media type (`image/png`), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// What decided it, for people.
    pub reason: String,
}

/// `Some` when the body is binary: `content_type` names a media type that
/// is not text, or (missing, or `application/octet-stream`) the body's
/// first bytes are not text.
pub fn binary(content_type: Option<&str>, body: &[u8]) -> Option<Binary> {
    let media = content_type
        .and_then(|c| c.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty());
    match media {
        Some(m) if is_text(&m) => None,
        Some(m) if m != "application/octet-stream" => Some(Binary {
            reason: format!("its Content-Type is {m}, not HTML, XML, JSON or text"),
            content_type: Some(m),
        }),
        media => {
            let what = sniff(body)?;
            let header = match &media {
                Some(m) => format!("its Content-Type is only {m}"),
                None => "it has no Content-Type".to_string(),
            };
            Some(Binary {
                reason: format!("{header} and its body {what}"),
                content_type: media,
            })
        }
    }
}

/// Whether a media type (lower case, no parameters) is one the extractor
/// reads: text, HTML, XML or JSON (and JavaScript, which is text).
fn is_text(media: &str) -> bool {
    let Some((kind, sub)) = media.split_once('/') else {
        return false;
    };
    kind == "text"
        || matches!(sub, "xml" | "json" | "x-json")
        || sub.ends_with("+xml")
        || sub.ends_with("+json")
        || (kind == "application" && matches!(sub, "javascript" | "x-javascript" | "ecmascript"))
}

/// What makes the first bytes of a body binary, or `None` when they read
/// as text: a PDF's signature (its first kilobytes are often plain
/// ASCII), or a control byte no text has (the HTML standard's "binary
/// data bytes": NUL and the C0 controls but tab, line feed, form feed,
/// carriage return and escape). A UTF-16 byte-order mark means text.
fn sniff(body: &[u8]) -> Option<&'static str> {
    if body.starts_with(&[0xFE, 0xFF]) || body.starts_with(&[0xFF, 0xFE]) {
        return None;
    }
    if body.starts_with(b"%PDF-") {
        return Some("starts as a PDF");
    }
    let head = &body[..body.len().min(SNIFF_BYTES)];
    head.iter()
        .any(|b| matches!(b, 0x00..=0x08 | 0x0B | 0x0E..=0x1A | 0x1C..=0x1F))
        .then_some("has bytes no text has")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn text_types_are_read_whatever_the_body() {
        for t in [
            "text/html; charset=utf-8",
            "TEXT/PLAIN",
            "application/xhtml+xml",
            "application/json",
            "application/ld+json",
            "application/rss+xml",
            "text/xml",
            "application/javascript",
        ] {
            assert_eq!(binary(Some(t), PNG), None, "{t}");
        }
    }

    #[test]
    fn other_types_are_binary_whatever_the_body() {
        for t in ["image/png", "application/pdf", "application/zip; x=1"] {
            let b = binary(Some(t), b"<html>hello</html>").expect(t);
            assert_eq!(b.content_type.as_deref(), t.split(';').next());
        }
    }

    #[test]
    fn without_a_useful_type_the_first_bytes_decide() {
        for t in [None, Some(""), Some("application/octet-stream")] {
            assert_eq!(binary(t, b"<!DOCTYPE html><p>hi\x0c\x1b</p>"), None);
            assert_eq!(binary(t, b""), None);
            assert_eq!(binary(t, b"\xff\xfe<\0h\0"), None);
            let png = binary(t, PNG).expect("a PNG is binary");
            assert!(png.reason.contains("bytes no text has"), "{}", png.reason);
            assert!(binary(t, b"%PDF-1.7\n%plain so far").is_some());
        }
        let none = binary(None, PNG).unwrap();
        assert_eq!(
            (none.content_type, none.reason.as_str()),
            (
                None,
                "it has no Content-Type and its body has bytes no text has"
            )
        );
    }
}
