//! w3lib 2.5.0's `safe_url_string(url, encoding)`: the URL as Scrapy stores
//! it on a `Request` (with UTF-8) and as its link extractor emits it (with
//! the page's encoding).
//!
//! The path is always percent-encoded as UTF-8; the query and fragment are
//! encoded with the given encoding, so a link on a GBK page keeps a
//! GBK-escaped query. The host goes through IDNA ([`super::idna`]) and the
//! user info and port are rebuilt from their parsed values.

use std::borrow::Cow;

use encoding_rs::Encoding;

use super::percent::{quote_into, unquote, PATH_SAFEST, SPECIAL_QUERY_SAFEST, USERINFO_SAFEST};
use super::split::{is_special, strip, urlsplit, urlunsplit, SplitUrl};
use super::{codec, idna};
use super::{UrlError, UrlErrorKind};

/// A URL after w3lib's `_safe_url_split`: every part already safe.
pub(super) struct SafeParts {
    pub scheme: String,
    pub netloc: String,
    pub path: String,
    pub query: String,
    pub fragment: String,
}

/// Exactly w3lib 2.5.0's `safe_url_string(url, encoding)` (with its default
/// `path_encoding="utf8"` and `quote_path=True`).
///
/// Where Python raises `ValueError` (a bad port, a malformed IPv6 host, a
/// host that NFKC turns into delimiters, a query or fragment character the
/// encoding cannot represent) this returns `url` unchanged; use
/// [`try_safe_url_string`] to tell those cases apart, e.g. to skip a link as
/// Scrapy's link extractor does.
///
/// `encoding` is the page's encoding as encoding_rs names it; the query and
/// fragment are encoded as the Python codec Scrapy resolves it to would
/// encode them (a GBK page as `gb18030`, Shift_JIS as `cp932`, Big5 as
/// `big5hkscs`), not as encoding_rs's WHATWG encoder would.
#[must_use]
pub fn safe_url_string(url: &str, encoding: &'static Encoding) -> String {
    try_safe_url_string(url, encoding).unwrap_or_else(|_| url.to_owned())
}

/// [`safe_url_string`], reporting where Python would raise.
///
/// # Errors
///
/// Every [`UrlErrorKind`] but `MissingScheme`, where w3lib raises
/// `ValueError`.
pub fn try_safe_url_string(url: &str, encoding: &'static Encoding) -> Result<String, UrlError> {
    let parts = safe_url_split(url, encoding).map_err(|kind| UrlError::new(url, kind))?;
    Ok(urlunsplit(
        &parts.scheme,
        &parts.netloc,
        &parts.path,
        &parts.query,
        &parts.fragment,
    ))
}

/// w3lib `_safe_url_split(url, encoding)`.
pub(super) fn safe_url_split(
    url: &str,
    encoding: &'static Encoding,
) -> Result<SafeParts, UrlErrorKind> {
    let parts = urlsplit(&strip(url))?;
    let netloc = safe_netloc(&parts)?;

    let mut path = String::with_capacity(parts.path.len());
    quote_into(parts.path.as_bytes(), &mut path, &PATH_SAFEST, false);

    let query_safe = if is_special(&parts.scheme) {
        &SPECIAL_QUERY_SAFEST
    } else {
        &PATH_SAFEST
    };
    let mut query = String::with_capacity(parts.query.len());
    quote_into(
        &encode(&parts.query, encoding)?,
        &mut query,
        query_safe,
        false,
    );

    let mut fragment = String::with_capacity(parts.fragment.len());
    quote_into(
        &encode(&parts.fragment, encoding)?,
        &mut fragment,
        &PATH_SAFEST,
        false,
    );

    // Without a path, an HTTP client would send "?a=b" as the request
    // target, so special URLs with a query get "/".
    if path.is_empty() && !query.is_empty() && is_special(&parts.scheme) {
        path.push('/');
    }
    Ok(SafeParts {
        scheme: parts.scheme,
        netloc,
        path,
        query,
        fragment,
    })
}

/// The netloc rebuilt from its parsed parts: user info unquoted and quoted
/// again, host through IDNA, port as a plain number (`:080` becomes `:80`;
/// a default port stays).
fn safe_netloc(parts: &SplitUrl) -> Result<String, UrlErrorKind> {
    let mut netloc = String::with_capacity(parts.netloc.len());
    if let Some(username) = &parts.username {
        quote_into(
            &unquote(username.as_bytes()),
            &mut netloc,
            &USERINFO_SAFEST,
            false,
        );
        if let Some(password) = &parts.password {
            netloc.push(':');
            quote_into(
                &unquote(password.as_bytes()),
                &mut netloc,
                &USERINFO_SAFEST,
                false,
            );
        }
        netloc.push('@');
    }
    let host = &parts.hostname;
    if host.contains(':') {
        // An IPv6 (or IPvFuture) literal: the brackets come back, and its
        // zone must be ASCII.
        if !host.is_ascii() {
            return Err(UrlErrorKind::Unencodable);
        }
        netloc.push('[');
        netloc.push_str(host);
        netloc.push(']');
    } else {
        // w3lib keeps the Unicode host when IDNA refuses it (too long or
        // empty labels, prohibited characters, bidi rules).
        match idna::to_ascii(host) {
            Some(ascii) => netloc.push_str(&ascii),
            None => netloc.push_str(host),
        }
    }
    if let Some(port) = parts.port {
        netloc.push(':');
        netloc.push_str(&port.to_string());
    }
    Ok(netloc)
}

/// `text.encode(codec)`, mapping Python's `UnicodeEncodeError`.
fn encode<'a>(text: &'a str, encoding: &'static Encoding) -> Result<Cow<'a, [u8]>, UrlErrorKind> {
    codec::encode(text, encoding).ok_or(UrlErrorKind::Unencodable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use encoding_rs::{GBK, UTF_8};

    #[test]
    fn path_is_utf8_query_is_page_encoding() {
        assert_eq!(
            safe_url_string("http://例子.测试/路径?q=值#片", GBK),
            "http://xn--fsqu00a.xn--0zwm56d/%E8%B7%AF%E5%BE%84?q=%D6%B5#%C6%AC"
        );
        assert_eq!(
            safe_url_string("http://例子.测试/路径?q=值", UTF_8),
            "http://xn--fsqu00a.xn--0zwm56d/%E8%B7%AF%E5%BE%84?q=%E5%80%BC"
        );
    }

    #[test]
    fn unencodable_query_is_an_error() {
        let err = try_safe_url_string("http://h/?q=中", encoding_rs::WINDOWS_1252).unwrap_err();
        assert_eq!(err.kind, UrlErrorKind::Unencodable);
        assert_eq!(
            safe_url_string("http://h/?q=中", encoding_rs::WINDOWS_1252),
            "http://h/?q=中"
        );
    }

    #[test]
    fn netloc_is_rebuilt() {
        assert_eq!(
            safe_url_string("HTTP://a%3Ab:c d@H.com:080", UTF_8),
            "http://a%3Ab:c%20d@h.com:80"
        );
        assert_eq!(safe_url_string("https://h?x='", UTF_8), "https://h/?x=%27");
        assert_eq!(safe_url_string("foo://h?x='", UTF_8), "foo://h?x='");
    }
}
