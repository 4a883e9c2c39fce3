//! scrapy-redis 0.9.1's request fingerprint (`RFPDupeFilter.request_fingerprint`),
//! the value its dupefilter stores in the `<spider>:dupefilter` Redis set:
//!
//! ```python
//! fingerprint_data = {
//!     "method": to_unicode(request.method),
//!     "url": canonicalize_url(request.url),
//!     "body": (request.body or b"").hex(),
//! }
//! fingerprint_json = json.dumps(fingerprint_data, sort_keys=True)
//! return hashlib.sha1(fingerprint_json.encode()).hexdigest()
//! ```
//!
//! It does not touch Redis; the frontier stores what this returns.

use std::fmt::Write as _;

use encoding_rs::UTF_8;
use sha1::{Digest, Sha1};

use super::canonicalize::canonicalize_url;
use super::safe_url::try_safe_url_string;
use super::{UrlError, UrlErrorKind};

/// The fingerprint scrapy-redis 0.9.1 computes for a `scrapy.Request` whose
/// `method` and `url` attributes are these: lower-case sha1 hex of
/// `json.dumps({"body": body.hex(), "method": method, "url":
/// canonicalize_url(url)}, sort_keys=True)`.
///
/// `url` must be the request's stored URL, i.e. already through
/// `safe_url_string(raw, UTF-8)` as Scrapy's `Request` constructor does, and
/// `method` must already be upper-cased as Scrapy stores it; this function
/// applies neither. Use [`fingerprint_for`] to start from what a spider
/// wrote. If canonicalisation fails where Python would raise, the URL is
/// fingerprinted as given (scrapy-redis would raise instead).
#[must_use]
pub fn request_fingerprint(method: &str, url: &str, body: &[u8]) -> String {
    let mut json = String::with_capacity(40 + url.len() + method.len() + 2 * body.len());
    json.push_str("{\"body\": \"");
    json.push_str(&hex::encode(body));
    json.push_str("\", \"method\": ");
    push_json_string(&mut json, method);
    json.push_str(", \"url\": ");
    push_json_string(&mut json, &canonicalize_url(url));
    json.push('}');
    hex::encode(Sha1::digest(json.as_bytes()))
}

/// The fingerprint of `scrapy.Request(raw_url, method=method, body=body)`:
/// upper-cases the method and makes the URL safe (UTF-8) as the `Request`
/// constructor does, then [`request_fingerprint`].
///
/// # Errors
///
/// Fails where Scrapy refuses to build the request: the URL cannot be made
/// safe (see [`UrlErrorKind`]), or the safe URL has no `://` and is neither
/// `about:` nor `data:` ([`UrlErrorKind::MissingScheme`]).
pub fn fingerprint_for(method: &str, raw_url: &str, body: &[u8]) -> Result<String, UrlError> {
    let url = try_safe_url_string(raw_url, UTF_8)?;
    if !url.contains("://") && !url.starts_with("about:") && !url.starts_with("data:") {
        return Err(UrlError::new(raw_url, UrlErrorKind::MissingScheme));
    }
    Ok(request_fingerprint(&method.to_uppercase(), &url, body))
}

/// Appends `text` as Python's `json.dumps` writes a string with its default
/// `ensure_ascii=True`: `"` and `\` escaped, the usual short escapes for
/// control characters, and every other character outside printable ASCII
/// as `\uXXXX` (lower-case hex, UTF-16 surrogate pairs beyond the BMP).
fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_matches_python_ensure_ascii() {
        let mut out = String::new();
        push_json_string(&mut out, "a\"\\\n\u{7f}é😀");
        assert_eq!(out, r#""a\"\\\n\u007f\u00e9\ud83d\ude00""#);
    }

    #[test]
    fn fingerprint_of_a_plain_get() {
        // hashlib.sha1(b'{"body": "", "method": "GET", "url": "http://example.com/"}')
        assert_eq!(
            request_fingerprint("GET", "http://example.com", b""),
            "db723d399cb551c9ef8eca77ed8dbed4a0522b4f"
        );
    }

    #[test]
    fn fingerprint_for_applies_request_rules() {
        assert_eq!(
            fingerprint_for("get", "http://example.com", b""),
            Ok(request_fingerprint("GET", "http://example.com", b""))
        );
        let err = fingerprint_for("GET", "example.com/page", b"").unwrap_err();
        assert_eq!(err.kind, UrlErrorKind::MissingScheme);
    }
}
